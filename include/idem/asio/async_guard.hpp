#pragma once
// AsyncGuard: IdempotencyGuard for coroutines on Boost.Asio, suspending instead of blocking on
// every store call and pause (docs/async.md).

#include <boost/asio/awaitable.hpp>
#include <stdexcept>
#include <string_view>
#include <type_traits>
#include <utility>

#include "idem/asio/async_attempt.hpp"
#include "idem/asio/async_store.hpp"
#include "idem/asio/detail/async_engine.hpp"
#include "idem/codec.hpp"
#include "idem/engine/call_timer.hpp"
#include "idem/engine/engine.hpp"
#include "idem/engine/key_check.hpp"
#include "idem/key.hpp"
#include "idem/options.hpp"
#include "idem/outcome.hpp"

namespace idem {

/// The value type of an asynchronous handler `fn`: what it returns, or what the awaitable it
/// returns yields; called with or without an idem::AsyncContext&.
template <class Fn>
using async_handler_result_t =
    typename detail::AwaitedValue<detail::handler_return_t<Fn, AsyncContext>>::type;

/// Makes a handler idempotent on an event loop, as IdempotencyGuard does (same options, same
/// Outcome); store calls and Wait pauses suspend the coroutine instead of its thread. A call
/// cancelled before its handler's result exists, or whose handler throws, settles a key it
/// acquired (a cancelled one throws system_error(operation_aborted)); once the handler returned,
/// its result is committed and returned (docs/async.md). Thread-safe when the store is. Holds a
/// reference to the store; the guard must outlive every call it started.
template <AsyncStore S>
class AsyncGuard : public detail::GuardBase {
 public:
  /// Throws std::invalid_argument when an option is out of range (see IdempotencyGuard).
  explicit AsyncGuard(S& store, Options options = {})
      : GuardBase(std::move(options), OptionDefaults{}, detail::store_name_of<S>()), store_(store) {
    if (options_.keep_request) {
      throw std::invalid_argument(
          "idem: Options::keep_request is not supported by AsyncGuard (no asynchronous store "
          "keeps requests)");
    }
  }

  /// Runs `fn` once for `key`; repeats with the same payload replay its result, another payload
  /// is errc::payload_mismatch. `fn` (moved into the call) returns T or an awaitable of T and may
  /// take an idem::AsyncContext&. The awaitable keeps no reference to key or payload.
  template <class Fn>
  [[nodiscard]] boost::asio::awaitable<Outcome<async_handler_result_t<Fn>>> async_execute(
      const Key& key, std::string_view payload, Fn fn) {
    using R = async_handler_result_t<Fn>;
    detail::require_codable<R>();
    if (Failure bad = detail::validate_key(options_, key, policy_.store_name); bad.code) {
      return detail::async_ready<R>(Outcome<R>::failed(std::move(bad)));
    }
    return detail::async_execute_on<R>(
        policy_, detail::AsyncTarget<S>(store_, options_, key, options_.hash(payload)),
        std::move(fn));
  }

  /// async_execute(key, "", fn): without a payload every repeat of the key matches.
  template <class Fn>
  [[nodiscard]] auto async_execute(const Key& key, Fn fn) {
    return async_execute(key, std::string_view{}, std::move(fn));
  }

  /// The two-phase form (docs/async.md, Two phases): claims `key` and returns the key's answer or
  /// a hold on it (AsyncAttempt); `T` may be void. A key the guard rejects is answered key_invalid
  /// without a store call; key and payload are read before this returns. Cancellation as for
  /// async_execute.
  template <class T>
  [[nodiscard]] boost::asio::awaitable<AsyncAttempt<T, S>> async_begin(
      const Key& key, std::string_view payload = {}) {
    detail::require_codable<T>();
    detail::AsyncTarget<S> target(store_, options_, key, options_.hash(payload));
    if (Failure bad = detail::validate_key(options_, key, policy_.store_name); bad.code) {
      return detail::async_begin_refused<T>(policy_, std::move(target), std::move(bad));
    }
    return detail::async_begin_on<T>(policy_, std::move(target));
  }

  S& store() noexcept { return store_; }

 private:
  S& store_;
};

}  // namespace idem
