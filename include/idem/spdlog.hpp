#pragma once
// idem::spdlog (header-only): an Observer callback that logs what an operator acts on: refusals
// at info, lease_lost and took_over at warn, store errors and unrecorded results at error. A line
// names the key by a hash of its id, never by its bytes: a key is the client's, and whoever reads
// the logs could replay its result with it.

#include <spdlog/spdlog.h>

#include <memory>
#include <string_view>
#include <utility>

#include "idem/fingerprint.hpp"
#include "idem/observer.hpp"

namespace idem {

/// The callback; pass it to an Observer (or PrometheusMetrics::observer(also)).
inline Observer::Callback spdlog_callback(std::shared_ptr<spdlog::logger> logger) {
  return [logger = std::move(logger)](const EventInfo& e) {
    spdlog::level::level_enum level = spdlog::level::off;
    switch (e.event) {
      case Event::in_progress:
      case Event::mismatched:
      case Event::rejected:
        level = spdlog::level::info;
        break;
      case Event::lease_lost:
      case Event::took_over:
      case Event::commit_retried:
        level = spdlog::level::warn;
        break;
      case Event::store_error:
      case Event::result_unrecorded:
        level = spdlog::level::err;
        break;
      default:
        return;
    }
    if (!logger->should_log(level)) return;
    const std::string error = e.error ? e.error.message() : std::string("-");
    logger->log(level, "idem {}: scope={} store={} key=#{:016x} fence={} error={}",
                to_string(e.event), e.scope, e.store, detail::hash_bytes(e.key), e.fence, error);
  };
}

/// An Observer that logs through `logger` (and counts, as every Observer does).
inline std::shared_ptr<Observer> spdlog_observer(std::shared_ptr<spdlog::logger> logger) {
  return std::make_shared<Observer>(spdlog_callback(std::move(logger)));
}

}  // namespace idem
