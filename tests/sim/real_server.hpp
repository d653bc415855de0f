#pragma once
// A real store (SQLite, PostgreSQL, Redis, Redis Cluster) as the simulation's server, so that
// the same checks run over it: each call's answer goes to the contract as it comes back. Where
// the store reaches its server through a FaultRelay, claims, commits, aborts and extends meet
// real network faults too (the request cut before the server, or the reply lost after it); a
// call whose answer is then an error may or may not have run, and the record, read through
// the store's admin (beside the relay), says which.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/admin.hpp"
#include "idem/batch_store.hpp"
#include "idem/steps.hpp"
#include "idem/store.hpp"
#include "sim/contract.hpp"
#include "sim/scheduler.hpp"
#include "sim/stats.hpp"
#include "sim/trace.hpp"
#include "support/fault_relay.hpp"

namespace idem::sim {

/// The (scope, key) an effective key was made of, or nullopt.
inline std::optional<std::pair<std::string, Key>> split_effective(const std::string& effective,
                                                                  std::string& principal,
                                                                  std::string& id) {
  std::size_t pos = 0;
  std::size_t n = 0;
  if (!admin::detail::read_varint(effective, pos, n) || n > effective.size() - pos) {
    return std::nullopt;
  }
  std::string scope = effective.substr(pos, n);
  if (!admin::detail::split_key(effective, scope, principal, id)) return std::nullopt;
  return std::pair<std::string, Key>{std::move(scope), Key{id, principal}};
}

template <class S>
class RealServer {
 public:
  /// `relay` (may be null): the FaultRelay the store's connections go through.
  RealServer(Scheduler& scheduler, Contract& contract, Trace& trace, Stats& stats,
             std::shared_ptr<S> store, std::unique_ptr<admin::Admin> admin,
             testing::FaultRelay* relay, int fault_per_mille)
      : scheduler_(&scheduler),
        contract_(&contract),
        trace_(&trace),
        stats_(&stats),
        store_(std::move(store)),
        admin_(std::move(admin)),
        relay_(relay),
        fault_per_mille_(fault_per_mille) {}

  Result<Claim> claim(const ClaimRequest& request) {
    const bool faulty = arm();
    const Time sent = scheduler_->now();
    Result<Claim> answer = store_->claim(request);
    Timed timed(*contract_, scheduler_->now() - sent);
    disarm(faulty);
    note("claim " + printable(request.key),
         answer ? claim_text(answer.value()) : answer.failure().describe());
    report_claim(request, answer);
    return answer;
  }
  Status commit(const Ticket& ticket, const Completion& completion) {
    const bool faulty = arm();
    const Time sent = scheduler_->now();
    Status answer = store_->commit(ticket, completion);
    Timed timed(*contract_, scheduler_->now() - sent);
    disarm(faulty);
    note("commit " + printable(ticket.key) + " fence " + std::to_string(ticket.fence),
         answer ? "ok" : answer.failure().describe());
    report_commit(ticket, completion, answer);
    return answer;
  }
  Status abort(const Ticket& ticket) {
    const bool faulty = arm();
    const Time sent = scheduler_->now();
    Status answer = store_->abort(ticket);
    Timed timed(*contract_, scheduler_->now() - sent);
    disarm(faulty);
    if (answer || !in_doubt(answer)) {
      contract_->abort(ticket, answer, scheduler_->now());
    } else if (const auto info = inspect(ticket.key)) {
      if (info->state == admin::State::released && info->fence == ticket.fence) {
        contract_->abort(ticket, Status{}, scheduler_->now());
      }
    }
    return answer;
  }
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease) {
    const bool faulty = arm();
    const Time sent = scheduler_->now();
    Status answer = store_->extend(ticket, lease);
    Timed timed(*contract_, scheduler_->now() - sent);
    disarm(faulty);
    if (answer || !in_doubt(answer)) {
      contract_->extend(ticket, lease, answer, scheduler_->now());
    } else if (const auto info = inspect(ticket.key)) {
      // In doubt: renewed if the lease left is now more than the contract's.
      const KeyRecord* r = contract_->find(ticket.key);
      if (r != nullptr && info->state == admin::State::in_progress && info->fence == ticket.fence &&
          scheduler_->now() + info->lease_left > r->lease_until) {
        contract_->extend(ticket, lease, Status{}, scheduler_->now());
      }
    }
    return answer;
  }
  Result<std::vector<StepRecord>> load_steps(const Ticket& ticket) requires StepStore<S> {
    Result<std::vector<StepRecord>> answer = store_->load_steps(ticket);
    if (answer || !in_doubt(Status(answer.failure()))) {
      contract_->load_steps(ticket, answer, scheduler_->now());
    }
    return answer;
  }
  Status save_step(const Ticket& ticket, const StepWrite& step) requires StepStore<S> {
    Status answer = store_->save_step(ticket, step);
    report_step(ticket, step, answer);
    return answer;
  }
  Status save_step_atomically(const Ticket& ticket, std::uint32_t index, std::string_view name,
                              AtomicStepBody body) requires AtomicStepStore<S> {
    // The body's result, for the contract's copy of the step.
    struct Watched {
      AtomicStepBody body;
      std::string result;
    } watched{body, {}};
    const AtomicStepBody watching{
        [](void* state, NativeTransaction transaction, std::string& result) {
          auto& w = *static_cast<Watched*>(state);
          const bool ran = w.body.run(w.body.state, transaction, result);
          w.result = result;
          return ran;
        },
        &watched};
    Status answer = store_->save_step_atomically(ticket, index, name, watching);
    if (answer || answer.error() == errc::lease_lost || in_doubt(answer)) {
      report_step(ticket, StepWrite{index, name, watched.result}, answer);
    }
    return answer;
  }
  Status keep_request(const Ticket& ticket, std::string_view request) requires CompletableStore<S> {
    Status answer = store_->keep_request(ticket, request);
    if (in_doubt(answer)) {
      contract_->request_in_doubt(ticket);
    } else {
      contract_->keep_request(ticket, request, answer, scheduler_->now());
    }
    return answer;
  }
  Result<std::vector<Abandoned>> find_abandoned(std::string_view prefix,
                                                std::size_t limit) requires CompletableStore<S> {
    Result<std::vector<Abandoned>> answer = store_->find_abandoned(prefix, limit);
    if (answer) contract_->find_abandoned(prefix, answer, scheduler_->now());
    return answer;
  }
  std::vector<Result<Claim>> claim_batch(std::span<const ClaimRequest> requests) requires
      BatchStore<S> {
    const Time sent = scheduler_->now();
    std::vector<Result<Claim>> answers = store_->claim_batch(requests);
    Timed timed(*contract_, scheduler_->now() - sent);
    for (std::size_t i = 0; i < answers.size() && i < requests.size(); ++i) {
      report_claim(requests[i], answers[i]);
    }
    return answers;
  }
  std::vector<Status> commit_batch(std::span<const CommitRequest> requests) requires BatchStore<S> {
    const Time sent = scheduler_->now();
    std::vector<Status> answers = store_->commit_batch(requests);
    Timed timed(*contract_, scheduler_->now() - sent);
    for (std::size_t i = 0; i < answers.size() && i < requests.size(); ++i) {
      report_commit(requests[i].ticket, requests[i].completion, answers[i]);
    }
    return answers;
  }

  Result<admin::Change> release(std::string_view scope, const Key& key, Fence only_fence) {
    Result<admin::Change> change = admin_->release(scope, key, only_fence);
    if (change) {
      contract_->release(admin::detail::effective_key(scope, key), only_fence, change->changed,
                         scheduler_->now());
    }
    return change;
  }
  Result<admin::Change> forget(std::string_view scope, const Key& key) {
    Result<admin::Change> change = admin_->forget(scope, key);
    if (change) {
      contract_->forget(admin::detail::effective_key(scope, key), change->changed,
                        scheduler_->now());
    }
    return change;
  }
  Result<std::size_t> purge() {
    Result<std::size_t> purged = admin_->purge_expired(1000);
    if (purged) {
      contract_->purge(scheduler_->now(), [&](const std::string& key) {
        const auto info = inspect(key);
        return info.has_value();
      });
    }
    return purged;
  }

 private:
  // A claim's answer to the contract; in doubt, the claim acquired if the record is now held
  // under a fence above the contract's, for this payload.
  void report_claim(const ClaimRequest& request, const Result<Claim>& answer) {
    if (answer) {
      contract_->claim(request, answer, scheduler_->now());
      return;
    }
    const auto info = inspect(request.key);
    if (!info) return;
    const KeyRecord* r = contract_->find(request.key);
    if (info->state == admin::State::in_progress && info->fingerprint == request.fingerprint &&
        (r == nullptr || info->fence > r->fence)) {
      contract_->claim_in_doubt(request, info->fence, scheduler_->now());
    }
  }
  // A commit's answer; in doubt, it landed if the record now holds it under the ticket's fence.
  void report_commit(const Ticket& ticket, const Completion& completion, const Status& answer) {
    if (answer || !in_doubt(answer)) {
      contract_->commit(ticket, completion, answer, scheduler_->now());
      return;
    }
    const auto info = inspect(ticket.key);
    const admin::State done =
        completion.status == ClaimStatus::failed ? admin::State::failed : admin::State::completed;
    if (info && info->state == done && info->fence == ticket.fence) {
      contract_->commit(ticket, completion, Status{}, scheduler_->now());  // it landed
    }
  }
  // A step's answer; in doubt, the steps are read back (the holder's, if it still holds).
  void report_step(const Ticket& ticket, const StepWrite& step, const Status& answer) {
    if (!in_doubt(answer)) {
      contract_->save_step(ticket, step, answer, scheduler_->now());
      return;
    }
    Result<std::vector<StepRecord>> steps = store_->load_steps(ticket);
    if (steps) contract_->resync_steps(ticket, steps.value());
  }

  // An answer that does not say whether the call ran: the connection failed or timed out (a
  // relay's fault, or the store's own timeout on a loaded machine).
  static bool in_doubt(const Status& answer) {
    return answer.error() == errc::store_unavailable || answer.error() == errc::outcome_unknown;
  }

  // While it lives, the contract reads boundaries knowing how long the reported call took.
  struct Timed {
    Timed(Contract& c, Duration d) : contract(&c) { c.took(d); }
    ~Timed() { contract->took({}); }
    Timed(const Timed&) = delete;
    Timed& operator=(const Timed&) = delete;
    Contract* contract;
  };

  // Arms a one-shot fault on the relay for the coming call, by chance; true when armed.
  bool arm() {
    if (relay_ == nullptr ||
        !scheduler_->rng().chance(static_cast<std::uint64_t>(fault_per_mille_))) {
      return false;
    }
    const auto any = [](std::string_view) { return true; };
    if (scheduler_->rng().chance(500)) {
      stats_->add(Stat::lost_requests);
      note("relay", "cuts the next request before the server");
      relay_->cut_before(any);
    } else {
      stats_->add(Stat::lost_replies);
      note("relay", "loses the next reply after the server");
      relay_->lose_reply_after(any);
    }
    return true;
  }
  void disarm(bool armed) {
    if (armed && !relay_->one_shot_fired()) {
      relay_->cut_before([](std::string_view) { return false; });  // nothing more to hit
    }
  }

  std::optional<admin::RecordInfo> inspect(std::string_view effective) {
    std::string principal;
    std::string id;
    const auto parts = split_effective(std::string(effective), principal, id);
    if (!parts) return std::nullopt;
    Result<std::optional<admin::RecordInfo>> found = admin_->inspect(parts->first, parts->second);
    if (!found || !found->has_value()) {
      note("in doubt: " + printable(effective), found ? "no record" : found.failure().describe());
      return std::nullopt;
    }
    note("in doubt: " + printable(effective), std::string(admin::to_string(found->value().state)) +
                                                  " fence " + std::to_string(found->value().fence));
    return *found.value();
  }

  void note(const std::string& what, const std::string& answer) {
    if (trace_->on()) trace_->add(*scheduler_, "store: " + what + " -> " + answer);
  }

  Scheduler* scheduler_;
  Contract* contract_;
  Trace* trace_;
  Stats* stats_;
  std::shared_ptr<S> store_;
  std::unique_ptr<admin::Admin> admin_;
  testing::FaultRelay* relay_;
  int fault_per_mille_;
};

}  // namespace idem::sim
