#pragma once
// IdempotencyGuard: claim -> run the handler -> commit | abort, over any idem::Store.

#include <chrono>
#include <exception>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "idem/attempt.hpp"
#include "idem/batch.hpp"
#include "idem/codec.hpp"
#include "idem/context.hpp"
#include "idem/engine/effective_key.hpp"
#include "idem/engine/engine.hpp"
#include "idem/engine/handler_call.hpp"
#include "idem/engine/key_check.hpp"
#include "idem/engine/sim_hooks.hpp"
#include "idem/error.hpp"
#include "idem/key.hpp"
#include "idem/observer.hpp"
#include "idem/options.hpp"
#include "idem/outcome.hpp"
#include "idem/result.hpp"
#include "idem/steps.hpp"
#include "idem/store.hpp"

namespace idem {

namespace detail {
/// execute() on a target, as an Attempt takes the engine's steps, on the caller's stack. A
/// throwing handler settles the key and the exception propagates.
template <class R, class Target, class Fn>
Outcome<R> execute_on(const Policy& policy, Target& target, Fn& fn) {
  Result<Claim> claimed = claim_or_wait(policy, target);
  if (!claimed) return Outcome<R>::failed(std::move(claimed).failure());
  Claim& claim = claimed.value();
  if (claim.status != ClaimStatus::acquired) return answer_stored<R>(policy, target, claim);
  const Fence fence = claim.fence;
  if (claim.took_over && !IDEM_SIM_MUTATE(11)) notify(policy, target, Event::took_over, fence, {});
  if constexpr (requires { target.keep_request(fence); }) {
    if (Status kept = target.keep_request(fence); !kept) {
      settle_failure(policy, target, fence, {}, /*remember=*/false, /*undo_effects=*/false);
      return Outcome<R>::failed(kept.failure());
    }
  }
  using Stored = std::conditional_t<std::is_void_v<R>, std::monostate, R>;
  std::optional<Stored> value;  // results need not be default-constructible
  try {
    Context context(target.context_store(), target.ticket(fence), target.lease(),
                    claim.transaction);
    if constexpr (std::is_void_v<R>) {
      call_handler(fn, context);
      value.emplace();
    } else {
      value.emplace(call_handler(fn, context));
    }
  } catch (...) {
    const bool remember = policy.remember_failures;
    settle_failure(policy, target, fence,
                   remember ? exception_message(std::current_exception()) : std::string{}, remember,
                   /*undo_effects=*/true);
    throw;
  }
  return commit_result<R>(policy, target, fence, std::move(*value));
}

/// What the engine claims for an IdempotencyGuard: one key of one store.
template <class S>
class StoreTarget {
 public:
  static constexpr bool kRewindable = RewindableStore<S>;

  StoreTarget(S& store, const Options& options, const Key& key, Fingerprint fingerprint,
              std::chrono::milliseconds block_for, const CallOptions& call = {})
      : store_(&store),
        options_(&options),
        key_(options.scope, key.principal, key.id),
        fingerprint_(fingerprint),
        block_for_(block_for),
        lease_(call.lease.count() > 0 ? call.lease : options.lease) {
    // Observers may name the key after the caller's Key is gone: keep a copy, only for them.
    if (options.observer) id_.assign(key.id);
  }

  ClaimRequest claim_request() const noexcept {
    return ClaimRequest{key_.view(),
                        fingerprint_,
                        lease_,
                        held_retention(*options_->ttl, lease_),
                        block_for_,
                        /*rewindable=*/options_->remember_failures};
  }
  Result<Claim> claim() { return store_->claim(claim_request()); }
  Result<Claim> claim_after_wait() {
    ClaimRequest request = claim_request();
    request.after_wait = true;
    return store_->claim(request);
  }
  CommitRequest commit_request(Fence fence, ClaimStatus status,
                               std::string_view bytes) const noexcept {
    return CommitRequest{ticket(fence), Completion{status, bytes, *options_->ttl}};
  }
  Status commit(Fence fence, ClaimStatus status, std::string_view bytes) {
    const CommitRequest r = commit_request(fence, status, bytes);
    return store_->commit(r.ticket, r.completion);
  }
  Status abort(Fence fence) { return store_->abort(ticket(fence)); }
  Status extend(Fence fence, std::chrono::milliseconds lease) {
    return store_->extend(ticket(fence), lease);
  }
  Status rewind(Fence fence) requires kRewindable { return store_->rewind(ticket(fence)); }
  void abandon() noexcept {}
  bool wakes() const noexcept requires WakingStore<S> {
    if constexpr (requires(const S& s) { s.wakes(); }) {
      return store_->wakes();
    } else {
      return true;
    }
  }
  void await_change(Fence holder, std::chrono::milliseconds bound) requires WakingStore<S> {
    store_->await_change(ticket(holder), bound);
  }

  /// execute() under Options::keep_request: the payload to keep (within max_kept_request).
  void keep(std::string_view payload) noexcept {
    if (payload.size() <= options_->max_kept_request) {
      request_ = payload;
      keeping_ = true;
    }
  }
  Status keep_request(Fence fence) requires CompletableStore<S> {
    if (!keeping_) return {};
    keeping_ = false;  // once, right after the claim: the payload is not kept alive past it
    return store_->keep_request(ticket(fence), std::exchange(request_, {}));
  }

  std::string_view scope() const noexcept { return options_->scope; }
  std::string_view key_id() const noexcept { return id_; }
  static std::string refusal_message(errc) { return {}; }  // the code's message says it all
  std::chrono::milliseconds lease() const noexcept { return lease_; }
  S& context_store() const noexcept { return *store_; }
  Ticket ticket(Fence fence) const noexcept { return Ticket{key_.view(), fence}; }
  CallTimer& timer() const noexcept { return timer_; }
  HandlerStart& handler_start() const noexcept { return handler_start_; }

 private:
  S* store_;
  const Options* options_;
  EffectiveKey key_;
  Fingerprint fingerprint_;
  std::chrono::milliseconds block_for_;
  std::chrono::milliseconds lease_;  // the call's (CallOptions::lease) or the guard's
  std::string id_;
  std::string_view request_{};
  bool keeping_ = false;
  mutable CallTimer timer_;  // for observers that time or trace calls
  mutable HandlerStart handler_start_;
};
}  // namespace detail

/// The result type of a handler `fn`, called with or without an idem::Context&.
template <class Fn>
using handler_result_t = detail::handler_return_t<Fn, Context>;

/// Makes a handler idempotent: for each key the handler runs once, and repeats get the stored
/// result (docs/design.md §5). Thread-safe when the store is; holds a reference to the store.
/// Cost: a fresh key is one claim and one commit; a replay or a refusal one claim (one per poll
/// under Wait).
template <class S>
class IdempotencyGuard : public detail::GuardBase {
  static_assert(Store<S>,
                "idem::IdempotencyGuard<S>: S is not an idem::Store. A store needs "
                "claim(const ClaimRequest&) -> Result<Claim>, commit(const Ticket&, const "
                "Completion&) -> Status, abort(const Ticket&) -> Status and extend(const Ticket&, "
                "std::chrono::milliseconds) -> Status (see idem/store.hpp).");

 public:
  /// The two-phase handle of this guard for a result of type T (see idem::Attempt).
  template <class T>
  using Attempt = idem::Attempt<T, detail::StoreTarget<S>>;

  /// Throws std::invalid_argument when an option is out of range; unset options take their
  /// defaults.
  explicit IdempotencyGuard(S& store, Options options = {})
      : GuardBase(std::move(options), OptionDefaults{}, detail::store_name_of<S>()), store_(store) {
    if (options_.keep_request && !CompletableStore<S>) {
      throw std::invalid_argument(
          "idem: Options::keep_request needs a store that keeps requests (idem::CompletableStore)");
    }
  }

  /// Runs `fn` once for `key`; repeats replay its result (execute(key, "", fn)).
  template <class Fn>
  [[nodiscard]] Outcome<handler_result_t<Fn>> execute(const Key& key, Fn&& fn) {
    return execute(key, std::string_view{}, std::forward<Fn>(fn));
  }

  /// Runs `fn` once for `key`; repeats with the same payload replay its result, another payload
  /// is errc::payload_mismatch. `fn` may take an idem::Context&. If `fn` throws, the claim is
  /// released (or recorded as failed under remember_failures) and the exception propagates.
  template <class Fn>
  [[nodiscard]] Outcome<handler_result_t<Fn>> execute(const Key& key, std::string_view payload,
                                                      Fn&& fn) {
    return execute(key, payload, CallOptions{}, std::forward<Fn>(fn));
  }

  /// execute() with this call's own choices (CallOptions: a lease for a call with a deadline).
  /// Throws std::invalid_argument for a negative lease.
  template <class Fn>
  [[nodiscard]] Outcome<handler_result_t<Fn>> execute(const Key& key, std::string_view payload,
                                                      const CallOptions& call, Fn&& fn) {
    using R = handler_result_t<Fn>;
    detail::require_codable<R>();
    if (Failure bad = validate(key); bad.code) {
      return Outcome<R>::failed(std::move(bad));
    }
    check(call);
    detail::StoreTarget<S> target(store_, options_, key, options_.hash(payload),
                                  policy_.block_for(), call);
    if (options_.keep_request) target.keep(payload);
    return detail::execute_on<R>(policy_, target, fn);
  }

  /// The two-phase form: claims `key` and returns an Attempt that answers (outcome()) or holds
  /// the key until commit(value) or fail(message). T needs an idem::codec<T> (or is void). The
  /// guard and the store must outlive the Attempt.
  template <class T>
  [[nodiscard]] Attempt<T> begin(const Key& key, std::string_view payload = {}) {
    return begin<T>(key, payload, CallOptions{});
  }

  /// begin() with this call's own choices (CallOptions: a deadline's lease, claimed at once).
  /// Throws std::invalid_argument for a negative lease.
  template <class T>
  [[nodiscard]] Attempt<T> begin(const Key& key, std::string_view payload,
                                 const CallOptions& call) {
    detail::require_codable<T>();
    check(call);
    if (Failure bad = validate(key); bad.code) {
      return Attempt<T>(std::move(bad), detail::StoreTarget<S>(store_, options_, key, {}, {}));
    }
    detail::StoreTarget<S> target(store_, options_, key, options_.hash(payload),
                                  policy_.block_for(), call);
    if (options_.keep_request) target.keep(payload);  // kept by the Attempt's claim, at once
    return Attempt<T>(policy_, std::move(target));
  }

  /// Runs `fn(i)` (or `fn(i, idem::Context&)`) once for each item i's key, as execute() would,
  /// but claims every key in one store step and commits the results in one (docs/batches.md).
  /// One Outcome per item, in order; handlers run one after the other on this thread. A throwing
  /// handler's Outcome carries its message and handler_aborted (released) or handler_failed.
  template <class Fn>
  [[nodiscard]] std::vector<Outcome<batch_result_t<Fn>>> execute_batch(
      std::span<const BatchItem> items, Fn&& fn) {
    using R = batch_result_t<Fn>;
    detail::require_codable<R>();
    std::vector<std::optional<Outcome<R>>> answers(items.size());
    std::vector<detail::StoreTarget<S>> targets;
    std::vector<std::size_t> index;
    targets.reserve(items.size());
    index.reserve(items.size());
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (Failure bad = validate(items[i].key); bad.code) {
        answers[i].emplace(Outcome<R>::failed(std::move(bad)));
        continue;
      }
      targets.emplace_back(store_, options_, items[i].key, options_.hash(items[i].payload),
                           policy_.block_for());
      index.push_back(i);
    }
    if (!targets.empty()) detail::execute_batch_on<R>(policy_, store_, targets, index, answers, fn);
    std::vector<Outcome<R>> out;
    out.reserve(items.size());
    for (std::optional<Outcome<R>>& a : answers) out.push_back(std::move(*a));
    return out;
  }

  S& store() noexcept { return store_; }

 private:
  static void check(const CallOptions& call) {
    if (call.lease.count() < 0) {
      throw std::invalid_argument("idem: CallOptions::lease must be >= 0 (0: the guard's lease)");
    }
  }

  // The key's refusal (key_invalid, reported to the observer), or no failure.
  Failure validate(const Key& key) const {
    return detail::validate_key(options_, key, policy_.store_name);
  }

  S& store_;
};

}  // namespace idem
