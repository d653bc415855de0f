#pragma once
// MemoryTokenStore: the one-time token strategy in process memory: token records
// (detail::MemoryTokenRecords) and the guard that claims through them. Header-only.

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "idem/clock.hpp"
#include "idem/detail/effective_key.hpp"
#include "idem/detail/memory_token_records.hpp"
#include "idem/detail/token.hpp"
#include "idem/detail/token_guard.hpp"
#include "idem/guard.hpp"
#include "idem/options.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem {

struct MemoryTokenStoreOptions {
  /// The guard behind execute(): its scope names the token namespace (unset: "token"), and its
  /// lease, ttl (how long a consumed token replays), in-progress policy and observer apply.
  /// Fields left unset keep these defaults (idem::Options).
  Options guard{};
  /// Time source for token expiry and leases (default: steady clock).
  std::shared_ptr<Clock> clock = nullptr;
};

/// One-time tokens in process memory, for single-process services and tests; same behaviour as
/// RedisTokenStore. issue() hands out a token; execute(token, fn) consumes it: the first request
/// runs fn, a repeat of that request replays its result, and anything else is refused.
///
/// | the token is...                                  | execute(token, payload, fn)          |
/// |--------------------------------------------------|--------------------------------------|
/// | unknown, expired, or malformed                   | errc::token_invalid                  |
/// | pending                                          | runs fn (the claim consumes it)      |
/// | being consumed, same payload, lease live         | errc::in_progress (or waits)         |
/// | consumed or being consumed with another payload  | errc::token_invalid                  |
/// | consumed with the same payload                   | replays the result                   |
/// | consumed, but fn threw                           | pending again, until its expiry      |
///
/// It is the token records plus an IdempotencyGuard over them; the scope is the guard's alone.
/// Also an idem::Store over the guard's effective keys (it forwards to the records), so it can
/// be a TokenLayer of a LayeredGuard. Thread-safe (one mutex).
class MemoryTokenStore {
  using Records = detail::MemoryTokenRecords;

 public:
  /// What the guard options' unset fields become (idem::Options).
  static constexpr OptionDefaults kDefaults{.scope = "token"};

  /// The two-phase handle of begin<T>() (see idem::Attempt).
  template <class T>
  using Attempt = typename IdempotencyGuard<Records>::template Attempt<T>;

  /// Throws std::invalid_argument when the guard options are out of range.
  explicit MemoryTokenStore(MemoryTokenStoreOptions options = {})
      : records_(options.clock ? std::move(options.clock) : steady_clock()),
        guard_(records_, with_defaults(std::move(options.guard), kDefaults)) {}
  MemoryTokenStore(const MemoryTokenStore&) = delete;
  MemoryTokenStore& operator=(const MemoryTokenStore&) = delete;

  /// A new pending token, valid for `ttl` (at least 1 ms) until consumed.
  Result<std::string> issue(std::chrono::milliseconds ttl) {
    Result<std::string> token = detail::random_token();
    if (!token) return token;
    records_.add(detail::EffectiveKey(options().scope, {}, token.value()).view(), ttl);
    return token;
  }

  /// Consumes `token` and runs fn once; see the table above. Without a payload every repeat of
  /// the token matches.
  template <class Fn>
  [[nodiscard]] Outcome<handler_result_t<Fn>> execute(std::string_view token, Fn&& fn) {
    return detail::execute_token(guard_, token, {}, fn);
  }
  template <class Fn>
  [[nodiscard]] Outcome<handler_result_t<Fn>> execute(std::string_view token,
                                                      std::string_view payload, Fn&& fn) {
    return detail::execute_token(guard_, token, payload, fn);
  }

  /// The two-phase form of execute(): claims `token` and returns an Attempt that answers
  /// (outcome(): a replay, or a refusal such as token_invalid) or holds the token until its
  /// commit(value) or fail(message); fail() returns it to pending. The store must outlive it.
  template <class T>
  [[nodiscard]] Attempt<T> begin(std::string_view token, std::string_view payload = {}) {
    return detail::begin_token<T>(guard_, token, payload);
  }

  /// The guard's options; options().scope names the token namespace.
  const Options& options() const noexcept { return guard_.options(); }

  /// Removes expired tokens; returns how many went.
  std::size_t purge_expired() { return records_.purge_expired(); }
  /// Tokens held now (pending, in use, consumed; expired ones until purged).
  std::size_t size() const { return records_.size(); }

  // --- idem::Store, over the guard's effective keys --------------------------------------------
  Result<Claim> claim(const ClaimRequest& request) { return records_.claim(request); }
  Status commit(const Ticket& ticket, const Completion& completion) {
    return records_.commit(ticket, completion);
  }
  Status abort(const Ticket& ticket) { return records_.abort(ticket); }
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease) {
    return records_.extend(ticket, lease);
  }

 private:
  Records records_;                  // first: the guard refers to it
  IdempotencyGuard<Records> guard_;  // holds the scope
};

static_assert(Store<MemoryTokenStore>);

}  // namespace idem
