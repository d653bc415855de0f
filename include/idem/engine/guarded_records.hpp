#pragma once
// What the token stores and the request-ID caches share: a record store plus the IdempotencyGuard
// that claims through it, itself an idem::Store over the guard's effective keys (a layer).

#include <chrono>
#include <string_view>
#include <utility>

#include "idem/engine/token_guard.hpp"
#include "idem/guard.hpp"
#include "idem/key.hpp"
#include "idem/options.hpp"
#include "idem/outcome.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem::detail {

template <class Records>
class GuardedRecords {
 public:
  /// The two-phase handle of begin<T>() (see idem::Attempt).
  template <class T>
  using Attempt = typename IdempotencyGuard<Records>::template Attempt<T>;

  GuardedRecords(const GuardedRecords&) = delete;
  GuardedRecords& operator=(const GuardedRecords&) = delete;

  /// The guard's options; options().scope names the namespace of every key.
  const Options& options() const noexcept { return guard_.options(); }

  // --- idem::Store, over the guard's effective keys --------------------------------------------
  Result<Claim> claim(const ClaimRequest& request) { return records_.claim(request); }
  Status commit(const Ticket& ticket, const Completion& completion) {
    return records_.commit(ticket, completion);
  }
  Status abort(const Ticket& ticket) { return records_.abort(ticket); }
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease) {
    return records_.extend(ticket, lease);
  }
  void await_change(const Ticket& held,
                    std::chrono::milliseconds bound) requires WakingStore<Records> {
    records_.await_change(held, bound);
  }

 protected:
  /// Builds the records from `records_args`, then the guard over them with `guard_options`
  /// (throws std::invalid_argument when those are out of range).
  template <class... A>
  explicit GuardedRecords(Options guard_options, A&&... records_args)
      : records_(std::forward<A>(records_args)...), guard_(records_, std::move(guard_options)) {}
  ~GuardedRecords() = default;

  Records records_;                  // first: the guard refers to it
  IdempotencyGuard<Records> guard_;  // holds the scope
};

/// One-time tokens: a malformed token is refused as token_invalid before any store call; a
/// well-formed one is claimed as Key{token} (tokens are bearer: no principal).
template <class Records>
class TokenFront : public GuardedRecords<Records> {
 public:
  template <class T>
  using Attempt = typename GuardedRecords<Records>::template Attempt<T>;

  /// Consumes `token` and runs fn once. Without a payload every repeat of the token matches.
  template <class Fn>
  [[nodiscard]] Outcome<handler_result_t<Fn>> execute(std::string_view token, Fn&& fn) {
    return execute_token(this->guard_, token, {}, fn);
  }
  template <class Fn>
  [[nodiscard]] Outcome<handler_result_t<Fn>> execute(std::string_view token,
                                                      std::string_view payload, Fn&& fn) {
    return execute_token(this->guard_, token, payload, fn);
  }

  /// The two-phase form of execute(): an Attempt that answers (a replay, token_invalid, ...) or
  /// holds the token until commit(value) or fail(message), which returns it to pending. The store
  /// must outlive it.
  template <class T>
  [[nodiscard]] Attempt<T> begin(std::string_view token, std::string_view payload = {}) {
    return begin_token<T>(this->guard_, token, payload);
  }

 protected:
  using GuardedRecords<Records>::GuardedRecords;
};

/// Request ids: each is claimed as idem::Key{request_id, principal}.
template <class Records>
class RequestIdFront : public GuardedRecords<Records> {
 public:
  template <class T>
  using Attempt = typename GuardedRecords<Records>::template Attempt<T>;

  /// Runs fn once per request id; repeats replay its response.
  template <class Fn>
  [[nodiscard]] Outcome<handler_result_t<Fn>> execute(const Key& request, Fn&& fn) {
    return this->guard_.execute(request, std::forward<Fn>(fn));
  }
  /// As above; a repeat whose payload differs is errc::payload_mismatch.
  template <class Fn>
  [[nodiscard]] Outcome<handler_result_t<Fn>> execute(const Key& request, std::string_view payload,
                                                      Fn&& fn) {
    return this->guard_.execute(request, payload, std::forward<Fn>(fn));
  }

  /// The two-phase form of execute(): an Attempt that answers or holds the request id until
  /// commit(value) or fail(message), which frees it for a retry. The cache must outlive it.
  template <class T>
  [[nodiscard]] Attempt<T> begin(const Key& request, std::string_view payload = {}) {
    return this->guard_.template begin<T>(request, payload);
  }

 protected:
  using GuardedRecords<Records>::GuardedRecords;
};

}  // namespace idem::detail
