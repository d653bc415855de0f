#pragma once
// The engine's small pieces: decoding a replay and the commit retry loop (engine/engine.hpp).

#include <chrono>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "idem/clock.hpp"
#include "idem/codec.hpp"
#include "idem/detail/min_max.hpp"
#include "idem/engine/sim_hooks.hpp"
#include "idem/error.hpp"
#include "idem/options.hpp"
#include "idem/outcome.hpp"
#include "idem/result.hpp"

namespace idem::detail {

// A codec's decode failed: its idem::Error code if it threw one, else record_corrupt.
inline Failure decode_error(std::exception_ptr e) {
  try {
    std::rethrow_exception(std::move(e));
  } catch (const Error& ex) {
    return Failure{ex.code(), ex.what()};
  } catch (const std::exception& ex) {
    return Failure{make_error_code(errc::record_corrupt), ex.what()};
  } catch (...) {
    return Failure{make_error_code(errc::record_corrupt), "codec threw a non-standard exception"};
  }
}

/// A stored result as a replayed Outcome. Bytes the codec cannot read become a failure (usually
/// record_corrupt), never a value.
template <class R>
Outcome<R> decode_replay(std::string&& bytes) {
  try {
    if constexpr (std::is_void_v<R>) {
      if (!bytes.empty()) corrupt("stored result of a void handler is not empty");
      return Outcome<R>::replay({});
    } else {
      return Outcome<R>::replay(codec<R>::decode(std::move(bytes)));
    }
  } catch (...) {
    return Outcome<R>::failed(decode_error(std::current_exception()));
  }
}

/// The commit retry policy's decisions, one try at a time: whether a try's status settles the
/// commit (success, lease_lost, or the last try), the doubling pause before the next, and the
/// answer. outcome_unknown is retried like store_unavailable; once a try was in doubt, the answer
/// stays outcome_unknown. (No Status or Failure is copied or assigned here: this inline code is
/// compiled by every includer, and their assignments are costly to instantiate.)
class CommitTries {
 public:
  explicit CommitTries(const CommitRetry& policy) : policy_(policy), pause_(policy.backoff) {}

  /// After a try: true when `status` settles the commit; answer() then says with what.
  bool finished(const Status& status) {
    ++tries_;
    if (status.ok()) return true;
    if (status.error() == errc::outcome_unknown && !in_doubt_ && !IDEM_SIM_MUTATE(10)) {
      in_doubt_ = true;
      doubt_ = status.failure().describe();
    }
    return status.error() == errc::lease_lost || tries_ >= policy_.attempts;
  }
  /// The answer of a settled commit whose last try was `last`.
  Status answer(Status last) const {
    if (last.error() != errc::store_unavailable || !in_doubt_) return last;
    return Status(errc::outcome_unknown, doubt_ + "; the last try: " + last.failure().describe());
  }
  /// The pause before the next try; each call doubles the next one, up to max_backoff.
  std::chrono::milliseconds next_pause() {
    return std::exchange(pause_, min_of(pause_ * 2, policy_.max_backoff));
  }

 private:
  const CommitRetry& policy_;
  std::chrono::milliseconds pause_;
  int tries_ = 0;
  bool in_doubt_ = false;
  std::string doubt_;  // what the first try whose outcome is unknown said
};

/// Calls `commit()` until CommitTries says its status settles the commit, pausing between tries.
/// `on_retry(status)` hears of each failure that will be retried.
template <class Commit, class OnRetry>
Status commit_with_retry(const CommitRetry& policy, Clock& clock, Commit&& commit,
                         OnRetry&& on_retry) {
  CommitTries tries(policy);
  for (;;) {
    Status status = commit();
    if (tries.finished(status)) return tries.answer(std::move(status));
    on_retry(status);
    clock.sleep_for(tries.next_pause());
  }
}

/// Throws std::invalid_argument when a retry policy is out of range.
inline void check_commit_retry(const CommitRetry& policy, const char* owner) {
  if (policy.attempts < 1 || policy.backoff.count() < 0 || policy.max_backoff < policy.backoff) {
    throw std::invalid_argument(std::string("idem: ") + owner +
                                "::commit_retry needs attempts >= 1 and 0 <= backoff <= "
                                "max_backoff");
  }
}

}  // namespace idem::detail
