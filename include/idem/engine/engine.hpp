#pragma once
// The protocol engine: claim (or wait) -> answer | hold -> commit (with retry) | settle a failure,
// for IdempotencyGuard (one store) and LayeredGuard (a chain), through idem::Attempt. A target is
// what the engine claims and how to settle it:
//   Result<Claim> claim();                              every store call of one claim attempt
//   Status commit(Fence, ClaimStatus, std::string_view bytes);   completed or failed
//   Status abort(Fence);  Status extend(Fence, ms);  Status rewind(Fence);
//   void abandon();                                     a commit failed for good
//   static constexpr bool kRewindable;                  rewind() undoes the handler's writes
//   std::string_view scope() const; std::string_view key_id() const;   for observers
//   std::string refusal_message(errc) const;            in_progress / payload_mismatch text
//   std::chrono::milliseconds lease() const;            Context::extend_lease()'s default
//   Store& context_store(); Ticket ticket(Fence) const; what Context::extend_lease() renews
// and, for a target whose store can wake a waiting caller (WakingTarget below):
//   bool wakes() const; void await_change(Fence holder, std::chrono::milliseconds bound);

#include <chrono>
#include <concepts>
#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

#include "idem/clock.hpp"
#include "idem/codec.hpp"
#include "idem/detail/min_max.hpp"
#include "idem/engine/call_timer.hpp"
#include "idem/engine/duration_estimate.hpp"
#include "idem/engine/failure_record.hpp"
#include "idem/engine/protocol.hpp"
#include "idem/engine/sim_hooks.hpp"
#include "idem/error.hpp"
#include "idem/fingerprint.hpp"
#include "idem/observer.hpp"
#include "idem/options.hpp"
#include "idem/outcome.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem::detail {

/// The policies every guard applies, whatever it claims: limits, waiting, failure settlement,
/// commit retry and observers. Built once per guard, validated there.
struct Policy {
  std::size_t max_key_size = 256;
  std::size_t max_result_size = std::size_t{1} << 20;
  PayloadHash hash = &xxh3_128;
  InProgressPolicy in_progress = FailFast{};
  bool remember_failures = false;
  CommitRetry commit_retry{};
  std::shared_ptr<Clock> clock = nullptr;
  std::shared_ptr<Observer> observer = nullptr;
  std::string_view store_name{};  // observers' label for the store
  // The guard's recent handler durations: the retry hint of an in_progress refusal.
  std::shared_ptr<DurationEstimate> durations = std::make_shared<DurationEstimate>();

  const Wait* wait() const noexcept { return std::get_if<Wait>(&in_progress); }
  std::chrono::milliseconds block_for() const noexcept {
    const Wait* w = wait();
    return w != nullptr ? w->timeout : std::chrono::milliseconds{0};
  }
};

/// Throws std::invalid_argument when a policy is out of range; fills the default clock.
inline void check_policy(Policy& policy, const char* owner) {
  if (policy.hash == nullptr)
    throw std::invalid_argument(std::string("idem: ") + owner + "::hash must be set");
  check_commit_retry(policy.commit_retry, owner);
  if (const Wait* wait = policy.wait()) {
    // A zero first pause would never grow: the wait would spin instead of backing off.
    if (wait->timeout.count() < 0 || wait->initial_backoff.count() <= 0 ||
        wait->max_backoff < wait->initial_backoff) {
      throw std::invalid_argument(
          "idem: Wait needs timeout >= 0 and 0 < initial_backoff <= max_backoff");
    }
  }
  if (!policy.clock) policy.clock = steady_clock();
}

/// The policy fields of Options, which every guard shares (an unset in_progress is FailFast),
/// checked by check_policy. Throws std::invalid_argument when one is out of range.
inline Policy shared_policy(const Options& o, const char* owner) {
  Policy policy{o.max_key_size,      o.max_result_size, o.hash,  o.in_progress.value_or(FailFast{}),
                o.remember_failures, o.commit_retry,    o.clock, o.observer};
  check_policy(policy, owner);
  return policy;
}

/// The policy of a guard's Options, whose unset fields were filled (idem::with_defaults).
/// Throws std::invalid_argument when an option is out of range.
inline Policy policy_of(const Options& o) {
  if (o.lease.count() <= 0) throw std::invalid_argument("idem: Options::lease must be > 0");
  if (!o.ttl || o.ttl->count() <= 0) {
    throw std::invalid_argument("idem: Options::ttl must be > 0 (leave it unset for the default)");
  }
  return shared_policy(o, "Options");
}

/// What every guard keeps: its options, unset fields filled from `defaults`, and the policy
/// checked from them, which its calls and Attempts refer to (so a guard stays where it is).
/// Throws std::invalid_argument when an option is out of range.
class GuardBase {
 public:
  GuardBase(const GuardBase&) = delete;
  GuardBase& operator=(const GuardBase&) = delete;

  const Options& options() const noexcept { return options_; }

 protected:
  GuardBase(Options options, const OptionDefaults& defaults, std::string_view store_name)
      : options_(with_defaults(std::move(options), defaults)), policy_(policy_of(options_)) {
    options_.clock = policy_.clock;
    policy_.store_name = store_name;
  }
  ~GuardBase() = default;

  Options options_;
  Policy policy_;
};

/// A store's own refusal (bad key, token, transition, version) is not a failing store.
inline bool is_refusal(std::error_code e) noexcept {
  return e == errc::key_invalid || e == errc::token_invalid || e == errc::invalid_transition ||
         e == errc::version_conflict;
}

template <class Target>
void notify(const Policy& policy, const Target& target, Event event, Fence fence,
            std::error_code error) {
  if (policy.observer) {
    policy.observer->notify(
        EventInfo{event, target.scope(), target.key_id(), fence, error, policy.store_name});
  }
}

template <class Target>
concept TimedTarget = requires(const Target& t) {
  { t.timer() } -> std::same_as<CallTimer&>;
};

/// A call begins: decides whether to time it and opens its span (observers that ask).
template <class Target>
void begin_call(const Policy& policy, const Target& target) {
  if constexpr (TimedTarget<Target>) {
    if (!policy.observer) return;
    CallTimer& t = target.timer();
    t.timed = policy.observer->time_this_call();
    if (t.timed) t.mark = CallTimer::Clock::now();
    if (policy.observer->has_spans()) {
      t.span = policy.observer->start_span(
          EventInfo{Event::executed, target.scope(), target.key_id(), 0, {}, policy.store_name});
      t.span_open = true;
    }
  }
}

/// The claim is answered: its duration; the handler's starts.
template <class Target>
void claim_answered(const Policy& policy, const Target& target) {
  if constexpr (TimedTarget<Target>) {
    if (!policy.observer) return;
    CallTimer& t = target.timer();
    if (t.timed && !t.claim_done) t.durations.claim = t.lap();
    t.claim_done = true;
  }
}

/// The claim is answered; when it acquired, the handler starts.
template <class Target>
void claim_answered(const Policy& policy, const Target& target, const Claim& claim) {
  if (claim.status == ClaimStatus::acquired) handler_started(*policy.clock, target);
  claim_answered(policy, target);
}

/// The handler is done (its commit or settlement starts).
template <class Target>
void handler_done(const Policy& policy, const Target& target) {
  handler_ended(policy.durations.get(), *policy.clock, target);
  if constexpr (TimedTarget<Target>) {
    if (policy.observer && target.timer().timed)
      target.timer().durations.handler = target.timer().lap();
  }
}

/// The call's last event: with the call's durations, and it closes the span.
template <class Target>
void finish(const Policy& policy, const Target& target, Event event, Fence fence,
            std::error_code error) {
  if (!policy.observer) return;
  EventInfo info{event, target.scope(), target.key_id(), fence, error, policy.store_name};
  if constexpr (TimedTarget<Target>) {
    claim_answered(policy, target);
    CallTimer& t = target.timer();
    if (t.timed) {
      info.durations = t.durations;
      info.durations.measured = true;
    }
    policy.observer->notify(info);
    if (t.span_open) {
      t.span_open = false;
      policy.observer->end_span(t.span, info);
    }
  } else {
    policy.observer->notify(info);
  }
}

/// A held key's commit or settlement is done: its duration, then the call's last event.
template <class Target>
void finish_settled(const Policy& policy, const Target& target, Event event, Fence fence,
                    std::error_code error) {
  if constexpr (TimedTarget<Target>) {
    if (policy.observer && target.timer().timed) {
      target.timer().durations.commit = target.timer().lap();
    }
  }
  finish(policy, target, event, fence, error);
}

template <class Target>
void report(const Policy& policy, const Target& target, const Status& status, Fence fence) {
  notify(policy, target,
         status.error() == errc::lease_lost ? Event::lease_lost : Event::store_error, fence,
         status.error());
}

/// The wait policy's pacing while another caller holds the key: the pause before the next claim,
/// or none when the caller should give up. It doubles up to max_backoff, is cut to the time left,
/// and ends just after the holder's lease does, when a takeover becomes possible. `waking`: the
/// pause is a bound on a wait the holder's end cuts short, so it is max_backoff (cut the same way).
class WaitPacer {
 public:
  WaitPacer(const Wait* wait, const Clock& clock) : wait_(wait), clock_(&clock) {}

  std::optional<Clock::duration> next_pause(const Claim& busy, bool waking = false) {
    if (wait_ == nullptr) return std::nullopt;
    const auto now = clock_->now();
    if (!started_) {
      started_ = true;
      deadline_ = now + wait_->timeout;
      backoff_ = wait_->initial_backoff;
    }
    if (now >= deadline_ && !IDEM_SIM_MUTATE(9)) return std::nullopt;
    const std::chrono::milliseconds longest = waking ? wait_->max_backoff : backoff_;
    auto pause = IDEM_SIM_MUTATE(9) ? Clock::duration(longest)
                                    : min_of<Clock::duration>(longest, deadline_ - now);
    if (busy.lease_remaining.count() > 0) {
      pause = min_of<Clock::duration>(pause, busy.lease_remaining + std::chrono::milliseconds{1});
    }
    backoff_ = min_of(backoff_ * 2, wait_->max_backoff);
    return pause;
  }

 private:
  const Wait* wait_;
  const Clock* clock_;
  bool started_ = false;
  Clock::time_point deadline_{};
  std::chrono::milliseconds backoff_{};
};

/// Screens one claim's answer: a store failure or refusal, or a payload mismatch (turned into
/// its failure here), ends the claim step and is reported; true then. False when the claim
/// acquired, found a stored answer, or found a live holder.
template <class Target>
bool claim_refused(const Policy& policy, const Target& target, Result<Claim>& claim) {
  if (!claim) {
    // A store that blocks on the holder (SQLite's file lock) may answer in_progress itself.
    const std::error_code e = claim.error();
    const Event event = e == errc::in_progress ? Event::in_progress
                        : is_refusal(e)        ? Event::rejected
                                               : Event::store_error;
    finish(policy, target, event, 0, e);
    return true;
  }
  if (claim->status == ClaimStatus::mismatch) {
    finish(policy, target, Event::mismatched, claim->fence,
           make_error_code(errc::payload_mismatch));
    claim = make_failure(errc::payload_mismatch, target.refusal_message(errc::payload_mismatch));
    return true;
  }
  return false;
}

/// The refusal of a caller that found a live holder and stopped waiting (or never waits), with
/// the holder's lease left and when a retry is likely to succeed (engine/duration_estimate.hpp).
template <class Target>
Failure refuse_busy(const Policy& policy, const Target& target, const Claim& busy) {
  finish(policy, target, Event::in_progress, busy.fence, make_error_code(errc::in_progress));
  Failure refused = make_failure(errc::in_progress, target.refusal_message(errc::in_progress));
  refused.refusal =
      HolderLease{busy.lease_remaining, retry_hint(policy.durations.get(), busy.lease_remaining)};
  return refused;
}

/// A target whose store can wake a caller waiting for the holder (a WakingStore): wakes() says
/// whether the store that answered the last claim in_progress can, and await_change() waits on it
/// for the end of the hold under `holder` (the fence that claim returned), at most `bound`.
template <class Target>
concept WakingTarget = requires(Target& t, const Target& ct, Fence holder,
                                std::chrono::milliseconds bound) {
  { ct.wakes() } -> std::same_as<bool>;
  { t.await_change(holder, bound) } -> std::same_as<void>;
};

/// Whether a wait for the holder blocks on the target's store (woken when the hold ends) rather
/// than sleeping on the policy's clock: only with the real steady clock, since a test's clock
/// moves only when slept on.
template <class Target>
bool waits_on_store(const Policy& policy, const Target& target) {
  if constexpr (WakingTarget<Target>) {
    return policy.wait() != nullptr && target.wakes() &&
           dynamic_cast<const SteadyClock*>(policy.clock.get()) != nullptr;
  } else {
    return false;
  }
}

/// The pause before claiming again: a wait the hold's end cuts short when the store wakes,
/// otherwise a sleep (polling).
template <class Target>
void pause_for_holder(const Policy& policy, Target& target, bool waking, Fence holder,
                      Clock::duration pause) {
  if constexpr (WakingTarget<Target>) {
    if (waking) {
      target.await_change(holder, std::chrono::ceil<std::chrono::milliseconds>(pause));
      return;
    }
  }
  policy.clock->sleep_for(pause);
}

/// A claim after a wait for the holder: a target that can says so to its store
/// (ClaimRequest::after_wait).
template <class Target>
Result<Claim> claim_after_wait(Target& target) {
  if constexpr (requires { target.claim_after_wait(); }) {
    return target.claim_after_wait();
  } else {
    return target.claim();
  }
}

/// Claims; refusals (payload mismatch, a live holder) become failures. Under Wait, waits while
/// another holds the key: woken by the hold's end on a WakingStore, else polling; either way it
/// looks again when the holder's lease ends.
template <class Target>
Result<Claim> claim_or_wait(const Policy& policy, Target& target) {
  WaitPacer pacer(policy.wait(), *policy.clock);
  begin_call(policy, target);
  // One Result, returned by name: the answer (a replay's bytes, a refusal) is built in the
  // caller's and never moved on the way out.
  Result<Claim> claim = target.claim();
  for (;;) {
    if (claim_refused(policy, target, claim)) break;
    if (claim->status != ClaimStatus::in_progress) {
      claim_answered(policy, target, claim.value());
      break;
    }
    const bool waking = waits_on_store(policy, target);
    if (const auto pause = pacer.next_pause(claim.value(), waking)) {
      pause_for_holder(policy, target, waking, claim->fence, *pause);
      claim = claim_after_wait(target);
      continue;
    }
    claim = refuse_busy(policy, target, claim.value());
    break;
  }
  return claim;
}

/// A remembered failure's bytes as a replayed Outcome; unreadable bytes are record_corrupt, not
/// replayed.
template <class R>
Outcome<R> replayed_failure(std::string_view bytes) {
  Failure failure = decode_failure(bytes);
  const bool corrupt = failure.code == errc::record_corrupt;
  return Outcome<R>::failed(std::move(failure), /*replayed=*/!corrupt);
}

/// A stored result (or remembered failure) as the caller's Outcome. One named Outcome, built in
/// place from either branch and returned by name: a replay's bytes move into it once.
template <class R, class Target>
Outcome<R> answer_stored(const Policy& policy, const Target& target, Claim& claim) {
  Outcome<R> out = claim.status == ClaimStatus::failed ? replayed_failure<R>(claim.result)
                                                       : decode_replay<R>(std::move(claim.result));
  // Not replayed: bytes the codec (or the failure record) could not read.
  finish(policy, target, out.replayed() ? Event::replayed : Event::store_error, claim.fence,
         out.error());
  return out;
}

/// Commits, retrying failures other than lease_lost with doubling pauses. A commit that fails
/// for good is reported and the target told (a layer chain then releases its outer layers).
template <class Target>
Status commit_with_retry(const Policy& policy, Target& target, Fence fence, ClaimStatus status,
                         std::string_view bytes) {
  Status committed = detail::commit_with_retry(
      policy.commit_retry, *policy.clock, [&] { return target.commit(fence, status, bytes); },
      [&](const Status& failed) {
        notify(policy, target, Event::commit_retried, fence, failed.error());
      });
  if (!committed) {
    report(policy, target, committed, fence);
    target.abandon();
  }
  return committed;
}

/// The holder failed (the handler threw, or fail() was called): release the key, or remember the
/// failure. `undo_effects`: the handler's writes through the store's transaction must not commit
/// with a remembered failure; a target that cannot rewind them gets its key released instead.
/// Failures are reported, never thrown. Returns handler_failed (remembered) or handler_aborted
/// (released, or left to its lease); the `aborted` event carries the same code.
template <class Target>
errc settle_failure(const Policy& policy, Target& target, Fence fence, std::string_view message,
                    bool remember, bool undo_effects) {
  handler_done(policy, target);
  if constexpr (Target::kRewindable) {
    if (remember && undo_effects && !IDEM_SIM_MUTATE(8)) {
      if (Status rewound = target.rewind(fence); !rewound) {
        report(policy, target, rewound, fence);
        remember = false;
      }
    }
  }
  Status settled;
  if (remember) {
    const std::string failure = encode_failure(errc::handler_failed, std::string(message));
    settled = target.commit(fence, ClaimStatus::failed, failure);
    if (!settled) target.abandon();
  } else {
    settled = target.abort(fence);
  }
  if (!settled) report(policy, target, settled, fence);
  const errc outcome = remember && settled ? errc::handler_failed : errc::handler_aborted;
  finish_settled(policy, target, Event::aborted, fence, make_error_code(outcome));
  return outcome;
}

/// The failure a result of `size` bytes over the policy's limit is remembered as.
inline Failure result_too_large(const Policy& policy, std::size_t size) {
  return make_failure(errc::result_too_large, "result is " + std::to_string(size) +
                                                  " bytes; the limit is " +
                                                  std::to_string(policy.max_result_size));
}

/// Records a held key's result (`bytes`, the value as stored) and returns the value as a fresh
/// Outcome: the result limit, commit with retry, and the events around them.
template <class T, class Target, class Stored>
Outcome<T> commit_bytes(const Policy& policy, Target& target, Fence fence, Stored&& value,
                        std::string_view bytes) {
  handler_done(policy, target);
  // `executed` ends the call, after the commit: it carries the commit's duration and error.
  auto executed = [&](std::error_code commit_error) {
    finish_settled(policy, target, Event::executed, fence, commit_error);
  };
  if (bytes.size() > policy.max_result_size) {
    // The work happened: repeats must not run it again, so its key remembers result_too_large;
    // this caller still gets the value it produced.
    Failure too_large = result_too_large(policy, bytes.size());
    const std::string failure = encode_failure(errc::result_too_large, too_large.message);
    Status remembered = commit_with_retry(policy, target, fence, ClaimStatus::failed, failure);
    executed(remembered.error());
    notify(policy, target, Event::result_unrecorded, fence, too_large.code);
    // Taken over meanwhile: the other holder's result is the key's answer, not this value.
    if (remembered.error() == errc::lease_lost) {
      return Outcome<T>::fresh(std::forward<Stored>(value), remembered.failure());
    }
    return Outcome<T>::fresh(std::forward<Stored>(value), std::move(too_large));
  }
  Status committed = commit_with_retry(policy, target, fence, ClaimStatus::completed, bytes);
  if (IDEM_SIM_MUTATE(7) && committed.error() == errc::lease_lost) committed = Status{};
  executed(committed.error());
  if (committed) return Outcome<T>::fresh(std::forward<Stored>(value));
  notify(policy, target, Event::result_unrecorded, fence, committed.error());
  return Outcome<T>::fresh(std::forward<Stored>(value), committed.failure());
}

/// What an exception says: its what(), else `otherwise`.
inline std::string exception_message(
    std::exception_ptr e, const char* otherwise = "handler threw a non-standard exception") {
  try {
    std::rethrow_exception(std::move(e));
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return otherwise;
  }
}

/// Encodes a held key's result (through codec<T>::view when the codec has one, without a copy)
/// and records it (commit_bytes). A value the codec cannot encode is remembered as
/// handler_failed, since the work happened, and the codec's exception propagates.
template <class T, class Target, class Stored>
Outcome<T> commit_result(const Policy& policy, Target& target, Fence fence, Stored&& value) {
  if constexpr (std::is_void_v<T>) {
    return commit_bytes<T>(policy, target, fence, std::forward<Stored>(value), {});
  } else {
    std::string encoded;
    std::string_view bytes;  // the result as stored: a view of `encoded` or of the value
    try {
      bytes = stored_bytes(value, encoded);
    } catch (...) {
      settle_failure(policy, target, fence, exception_message(std::current_exception()),
                     /*remember=*/true, /*undo_effects=*/false);
      throw;
    }
    return commit_bytes<T>(policy, target, fence, std::forward<Stored>(value), bytes);
  }
}

}  // namespace idem::detail
