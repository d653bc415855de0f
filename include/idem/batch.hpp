#pragma once
// Batches: the item type and the engine's batch steps behind IdempotencyGuard::execute_batch
// (docs/batches.md).

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "idem/batch_store.hpp"
#include "idem/codec.hpp"
#include "idem/context.hpp"
#include "idem/engine/engine.hpp"
#include "idem/engine/handler_call.hpp"
#include "idem/engine/sim_hooks.hpp"
#include "idem/error.hpp"
#include "idem/key.hpp"
#include "idem/outcome.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem {

/// One call of a batch: its key and the payload its fingerprint is taken of (empty: every repeat
/// of the key matches). The views must outlive the execute_batch call.
struct BatchItem {
  Key key;
  std::string_view payload{};
};

namespace detail {

/// A target whose first claim was already made (in the batch's claim step): claim_or_wait takes
/// that answer first and asks the target again only to wait for a holder.
template <class Target>
class PrefetchedClaim {
 public:
  PrefetchedClaim(Target& target, Result<Claim> first)
      : target_(&target), first_(std::move(first)) {}

  Result<Claim> claim() {
    if (!first_) return target_->claim();
    Result<Claim> first = std::move(*first_);
    first_.reset();
    return first;
  }
  bool wakes() const requires WakingTarget<Target> { return target_->wakes(); }
  void await_change(Fence holder, std::chrono::milliseconds bound) requires WakingTarget<Target> {
    target_->await_change(holder, bound);
  }
  std::string_view scope() const noexcept { return target_->scope(); }
  std::string_view key_id() const noexcept { return target_->key_id(); }
  std::string refusal_message(errc e) const { return target_->refusal_message(e); }
  HandlerStart& handler_start() const noexcept requires TimesHandlers<Target> {
    return target_->handler_start();
  }

 private:
  Target* target_;
  std::optional<Result<Claim>> first_;
};

/// The answers to `n` requests of a batch step that answered another number of them: `code`
/// for each. (Built, not assigned: a Status assignment is costly to instantiate.)
template <class Answer>
std::vector<Answer> miscounted(std::size_t n, errc code, const char* what) {
  const Failure wrong = make_failure(code, "the store answered a batch of " + std::to_string(n) +
                                               " " + what + " with another number of answers");
  std::vector<Answer> answers;
  answers.reserve(n);
  for (std::size_t i = 0; i < n; ++i) answers.emplace_back(wrong);
  return answers;
}

/// Every target's claim: in one batch step when the store has one, else one claim per key.
template <class S, class Target>
std::vector<Result<Claim>> claim_all(S& store, std::vector<Target>& targets) {
  std::vector<Result<Claim>> claims;
  if constexpr (BatchStore<S>) {
    std::vector<ClaimRequest> requests;
    requests.reserve(targets.size());
    for (const Target& t : targets) requests.push_back(t.claim_request());
    claims = store.claim_batch(requests);
    if (claims.size() != targets.size()) {
      return miscounted<Result<Claim>>(targets.size(), errc::store_unavailable, "claims");
    }
  } else {
    claims.reserve(targets.size());
    for (Target& t : targets) claims.push_back(t.claim());
  }
  return claims;
}

/// Every commit of `requests`: in one batch step when the store has one, else one per key.
template <class S>
std::vector<Status> commit_all(S& store, std::span<const CommitRequest> requests) {
  std::vector<Status> statuses;
  if constexpr (BatchStore<S>) {
    statuses = store.commit_batch(requests);
    if (statuses.size() != requests.size()) {
      return miscounted<Status>(requests.size(), errc::outcome_unknown, "commits");
    }
  } else {
    statuses.reserve(requests.size());
    for (const CommitRequest& r : requests)
      statuses.push_back(store.commit(r.ticket, r.completion));
  }
  return statuses;
}

/// The batch on `targets` (the valid items, in order; `index[k]` is target k's item): claims them
/// all, answers the keys it did not acquire as execute() would, runs `fn(item index[, Context&])`
/// on each acquired key in order, then commits the results together. A throwing handler settles
/// its key as execute() does; the other items carry on. A commit that fails other than by
/// lease_lost is retried for its key alone under CommitRetry.
template <class R, class S, class Target, class Fn>
void execute_batch_on(const Policy& policy, S& store, std::vector<Target>& targets,
                      const std::vector<std::size_t>& index,
                      std::vector<std::optional<Outcome<R>>>& answers, Fn& fn) {
  using Stored = std::conditional_t<std::is_void_v<R>, std::monostate, R>;
  struct Held {
    std::size_t target;
    Fence fence;
    std::optional<Stored> value;
    std::string encoded;     // the encoding, when the codec has no view
    std::string_view bytes;  // the result as stored: a view of `encoded` or of `value`
  };
  std::vector<Result<Claim>> claims = claim_all(store, targets);
  std::vector<Held> held;
  held.reserve(targets.size());  // never moves: `bytes` may view a held value

  for (std::size_t k = 0; k < targets.size(); ++k) {
    Target& target = targets[k];
    std::optional<Outcome<R>>& answer = answers[index[k]];
    PrefetchedClaim<Target> prefetched(target, std::move(claims[k]));
    Result<Claim> claimed = claim_or_wait(policy, prefetched);
    if (!claimed) {
      answer.emplace(Outcome<R>::failed(std::move(claimed).failure()));
      continue;
    }
    Claim& claim = claimed.value();
    if (claim.status != ClaimStatus::acquired) {
      answer.emplace(answer_stored<R>(policy, target, claim));
      continue;
    }
    const Fence fence = claim.fence;
    if (claim.took_over && !IDEM_SIM_MUTATE(11))
      notify(policy, target, Event::took_over, fence, {});
    Held& h = held.emplace_back(Held{k, fence, std::nullopt, {}, {}});
    try {
      Context context(target.context_store(), target.ticket(fence), target.lease(),
                      claim.transaction);
      if constexpr (std::is_void_v<R>) {
        call_handler(fn, context, index[k]);
        h.value.emplace();
      } else {
        h.value.emplace(call_handler(fn, context, index[k]));
      }
    } catch (...) {
      std::string message = exception_message(std::current_exception());
      const bool remember = policy.remember_failures;
      const errc settled =
          settle_failure(policy, target, fence, remember ? message : std::string{}, remember,
                         /*undo_effects=*/true);
      const errc said = IDEM_SIM_MUTATE(18) ? errc::handler_failed : settled;
      answer.emplace(Outcome<R>::failed(make_failure(said, std::move(message))));
      held.pop_back();
      continue;
    }
    if constexpr (!std::is_void_v<R>) {
      try {
        h.bytes = stored_bytes(*h.value, h.encoded);
      } catch (...) {
        // The work happened: remembered as handler_failed, as execute() does.
        std::string message = exception_message(std::current_exception());
        const errc settled = settle_failure(policy, target, fence, message, /*remember=*/true,
                                            /*undo_effects=*/false);
        answer.emplace(Outcome<R>::failed(make_failure(settled, std::move(message))));
        held.pop_back();
        continue;
      }
    }
    if (h.bytes.size() > policy.max_result_size) {
      // Rare: execute()'s own path remembers result_too_large for this key alone.
      answer.emplace(commit_bytes<R>(policy, target, fence, std::move(*h.value), h.bytes));
      held.pop_back();
    }
  }
  if (held.empty()) return;

  std::vector<CommitRequest> requests;
  requests.reserve(held.size());
  for (const Held& h : held) {
    requests.push_back(targets[h.target].commit_request(h.fence, ClaimStatus::completed, h.bytes));
  }
  std::vector<Status> statuses = commit_all(store, std::span<const CommitRequest>(requests));
  for (std::size_t j = 0; j < held.size(); ++j) {
    Held& h = held[j];
    Target& target = targets[h.target];
    Status committed = std::move(statuses[j]);
    if (!committed && committed.error() != errc::lease_lost) {
      notify(policy, target, Event::commit_retried, h.fence, committed.error());
      Status retried = commit_with_retry(policy, target, h.fence, ClaimStatus::completed, h.bytes);
      // The batch's own commit may have landed without its answer: then retries that could not
      // reach the store leave the commit in doubt (outcome_unknown), not failed (§8).
      if (retried.error() == errc::store_unavailable && !IDEM_SIM_MUTATE(15) &&
          committed.error() == errc::outcome_unknown) {
        retried =
            Status(errc::outcome_unknown, committed.failure().describe() +
                                              "; the last try: " + retried.failure().describe());
      }
      committed = std::move(retried);
    } else if (!committed) {
      report(policy, target, committed, h.fence);
      target.abandon();
    }
    // As execute(): `executed` once the commit, retries included, is done, with its error.
    notify(policy, target, Event::executed, h.fence, committed.error());
    std::optional<Outcome<R>>& answer = answers[index[h.target]];
    if (committed) {
      answer.emplace(Outcome<R>::fresh(std::move(*h.value)));
    } else {
      notify(policy, target, Event::result_unrecorded, h.fence, committed.error());
      answer.emplace(Outcome<R>::fresh(std::move(*h.value), committed.failure()));
    }
  }
}

}  // namespace detail

/// The result type of a batch handler `fn(std::size_t index[, idem::Context&])`.
template <class Fn>
using batch_result_t = detail::handler_return_t<Fn, Context, std::size_t>;

}  // namespace idem
