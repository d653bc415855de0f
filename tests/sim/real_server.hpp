#pragma once
// A real store (SQLite, PostgreSQL, Redis, Redis Cluster) as the simulation's server, so that
// the same checks run over it: each call's answer goes to the contract as it comes back. Where
// the store reaches its server through a FaultRelay, claims, commits, aborts and extends meet
// real network faults too (the request cut before the server, or the reply lost after it); a
// call whose answer is then an error may or may not have run, and the record, read through
// the store's admin (beside the relay), says which.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
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
  /// `make_store`: a store (for every process in lease mode; one per process in transactional
  /// mode, whose crash ends its sessions). `relay` (may be null): the FaultRelay the stores'
  /// connections go through.
  RealServer(Scheduler& scheduler, Contract& contract, Trace& trace, Stats& stats,
             std::function<std::shared_ptr<S>()> make_store, std::unique_ptr<admin::Admin> admin,
             testing::FaultRelay* relay, int fault_per_mille)
      : scheduler_(&scheduler),
        contract_(&contract),
        trace_(&trace),
        stats_(&stats),
        make_store_(std::move(make_store)),
        admin_(std::move(admin)),
        relay_(relay),
        fault_per_mille_(fault_per_mille),
        transactional_(contract.options().mode == StoreMode::transactional) {}

  /// Transactional mode: a crashed process's store goes, and its sessions roll back.
  void crash(int process) {
    if (!transactional_) return;
    for (auto it = open_.begin(); it != open_.end();) {
      if (it->second == process) {
        contract_->rolled_back(it->first.first, it->first.second);
        it = open_.erase(it);
      } else {
        ++it;
      }
    }
    stores_.erase(process);
  }

  Result<Claim> claim(const ClaimRequest& request) {
    const bool faulty = arm();
    const Time sent = scheduler_->now();
    Result<Claim> answer = store().claim(request);
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
    Status answer = store().commit(ticket, completion);
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
    Status answer = store().abort(ticket);
    Timed timed(*contract_, scheduler_->now() - sent);
    disarm(faulty);
    note("abort " + printable(ticket.key) + " fence " + std::to_string(ticket.fence),
         answer ? "ok" : answer.failure().describe());
    if (answer && transactional_ &&
        !open_.contains(std::pair{std::string(ticket.key), ticket.fence})) {
      // The transaction already ended (its connection dropped): the abort rolled back nothing.
    } else if (answer || !in_doubt(answer)) {
      contract_->abort(ticket, answer, scheduler_->now());
      if (answer) open_.erase({std::string(ticket.key), ticket.fence});
    } else if (transactional_) {
      session_ended(ticket);  // an abort that reached the store rolled back, as a dropped one did
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
    Status answer = store().extend(ticket, lease);
    Timed timed(*contract_, scheduler_->now() - sent);
    disarm(faulty);
    note("extend " + printable(ticket.key) + " fence " + std::to_string(ticket.fence),
         answer ? "ok" : answer.failure().describe());
    if (answer || !in_doubt(answer)) {
      contract_->extend(ticket, lease, answer, scheduler_->now());
    } else if (transactional_) {
      session_ended(ticket);
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
  Status rewind(const Ticket& ticket) requires RewindableStore<S> {
    Status answer = store().rewind(ticket);
    note("rewind " + printable(ticket.key) + " fence " + std::to_string(ticket.fence),
         answer ? "ok" : answer.failure().describe());
    if (answer) {
      contract_->rewound(ticket.key, ticket.fence);
    } else if (in_doubt(answer)) {
      session_ended(ticket);
    }
    return answer;
  }
  Result<std::vector<StepRecord>> load_steps(const Ticket& ticket) requires StepStore<S> {
    Result<std::vector<StepRecord>> answer = store().load_steps(ticket);
    if (answer || !in_doubt(Status(answer.failure()))) {
      contract_->load_steps(ticket, answer, scheduler_->now());
    }
    return answer;
  }
  Status save_step(const Ticket& ticket, const StepWrite& step) requires StepStore<S> {
    Status answer = store().save_step(ticket, step);
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
    Status answer = store().save_step_atomically(ticket, index, name, watching);
    if (answer || answer.error() == errc::lease_lost || in_doubt(answer)) {
      report_step(ticket, StepWrite{index, name, watched.result}, answer);
    }
    return answer;
  }
  Status keep_request(const Ticket& ticket, std::string_view request) requires CompletableStore<S> {
    Status answer = store().keep_request(ticket, request);
    if (in_doubt(answer)) {
      contract_->request_in_doubt(ticket);
    } else {
      contract_->keep_request(ticket, request, answer, scheduler_->now());
    }
    return answer;
  }
  Result<std::vector<Abandoned>> find_abandoned(std::string_view prefix,
                                                std::size_t limit) requires CompletableStore<S> {
    Result<std::vector<Abandoned>> answer = store().find_abandoned(prefix, limit);
    if (answer) contract_->find_abandoned(prefix, answer, scheduler_->now());
    return answer;
  }
  std::vector<Result<Claim>> claim_batch(std::span<const ClaimRequest> requests) requires
      BatchStore<S> {
    const Time sent = scheduler_->now();
    std::vector<Result<Claim>> answers = store().claim_batch(requests);
    Timed timed(*contract_, scheduler_->now() - sent);
    for (std::size_t i = 0; i < answers.size() && i < requests.size(); ++i) {
      report_claim(requests[i], answers[i]);
    }
    return answers;
  }
  std::vector<Status> commit_batch(std::span<const CommitRequest> requests) requires BatchStore<S> {
    const Time sent = scheduler_->now();
    std::vector<Status> answers = store().commit_batch(requests);
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
      if (transactional_ && answer->status == ClaimStatus::acquired) {
        open_[{std::string(request.key), answer->fence}] = scheduler_->current()->process;
      }
      return;
    }
    if (transactional_) return;  // a claim cut off rolled back with its connection
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
      if (answer) open_.erase({std::string(ticket.key), ticket.fence});
      return;
    }
    const auto info = inspect(ticket.key);
    const admin::State done =
        completion.status == ClaimStatus::failed ? admin::State::failed : admin::State::completed;
    if (info && info->state == done && info->fence == ticket.fence) {
      contract_->commit(ticket, completion, Status{}, scheduler_->now());  // it landed
      open_.erase({std::string(ticket.key), ticket.fence});
    } else {
      session_ended(ticket);
    }
  }
  // A step's answer; in doubt, the steps are read back (the holder's, if it still holds).
  void report_step(const Ticket& ticket, const StepWrite& step, const Status& answer) {
    if (!in_doubt(answer)) {
      contract_->save_step(ticket, step, answer, scheduler_->now());
      return;
    }
    session_ended(ticket);
    Result<std::vector<StepRecord>> steps = store().load_steps(ticket);
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

  // The running process's store.
  S& store() {
    const int process = transactional_ ? scheduler_->current()->process : 0;
    std::shared_ptr<S>& s = stores_[process];
    if (!s) s = make_store_();
    return *s;
  }

  // Transactional mode: a call on the holder's session that failed on its way ended the
  // session (the store drops a connection it cannot trust; the database rolls back what it had
  // open). The record cannot say so itself: another connection sees only committed rows.
  void session_ended(const Ticket& ticket) {
    if (!transactional_) return;
    contract_->rolled_back(ticket.key, ticket.fence);
    open_.erase({std::string(ticket.key), ticket.fence});
  }

  Scheduler* scheduler_;
  Contract* contract_;
  Trace* trace_;
  Stats* stats_;
  std::function<std::shared_ptr<S>()> make_store_;
  std::map<int, std::shared_ptr<S>> stores_;                        // by process (lease mode: one)
  std::map<std::pair<std::string, Fence>, int, std::less<>> open_;  // open transactions' process
  std::unique_ptr<admin::Admin> admin_;
  testing::FaultRelay* relay_;
  int fault_per_mille_;
  bool transactional_;
};

}  // namespace idem::sim
