#pragma once
// The network between the simulated processes and the record server. Every store call is a
// scheduling point, and may meet a fault the seed chose: the request lost before the server,
// the reply lost after it (the call ran: a commit landed and its caller does not know), the
// reply delayed past the lease, the request delivered twice (the copy arrives later), latency.
// A dead process's calls never reach the server; a server that is down refuses them; a reply in
// flight when the server restarts is lost.

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/batch_store.hpp"
#include "idem/error.hpp"
#include "idem/steps.hpp"
#include "idem/store.hpp"
#include "sim/scheduler.hpp"
#include "sim/stats.hpp"

namespace idem::sim {

/// Per-mille chances of each fault on one store call, and their sizes.
struct FaultRates {
  int lose_request = 0;
  int lose_reply = 0;
  int delay_reply = 0;
  int duplicate = 0;
  int latency = 0;
  Duration max_latency = std::chrono::milliseconds{3};
  Duration long_delay = std::chrono::milliseconds{100};  // a delayed reply: past the lease
};

/// The process number of the network's own tasks (the copies it delivers late).
inline constexpr int kNetwork = -1;

template <class Backend>
class Network {
 public:
  Network(Scheduler& scheduler, Backend& backend, FaultRates rates, Stats& stats)
      : scheduler_(&scheduler), backend_(&backend), rates_(rates), stats_(&stats) {}

  Backend& backend() noexcept { return *backend_; }
  const FaultRates& rates() const noexcept { return rates_; }
  void set_rates(const FaultRates& rates) noexcept { rates_ = rates; }

  /// The server goes down until `until` (a restart); replies in flight are lost.
  void restart(Time until) {
    down_until_ = until;
    ++generation_;
  }
  bool down() const noexcept { return scheduler_->now() < down_until_; }

  /// One call: `call()` runs at the server (atomically) unless a fault or a crash stops it;
  /// `lost(maybe_ran)` is the caller's answer when it never hears back; `duplicate()` returns
  /// the same request, owning its bytes, to deliver again later (or null).
  template <class Call, class Lost, class Duplicate>
  auto rpc(Call&& call, Lost&& lost, Duplicate&& duplicate) -> decltype(call()) {
    Task& task = *scheduler_->current();
    if (task.dead) return lost(false);
    ++task.store_calls;
    stats_->add(Stat::store_calls);
    Rng& rng = scheduler_->rng();
    pause(task, rng);
    if (task.dead) return lost(false);
    if (down()) {
      stats_->add(Stat::refused_while_down);
      return lost(false);
    }
    if (rng.chance(rates_.lose_request)) {
      stats_->add(Stat::lost_requests);
      dropped();
      return lost(false);
    }
    const std::uint64_t generation = generation_;
    const Time sent = scheduler_->now();
    auto answer = call();
    task.held_up += scheduler_->now() - sent;  // a real store's call takes real time
    if (rng.chance(rates_.duplicate)) {
      if (auto again = duplicate()) {
        stats_->add(Stat::duplicates);
        deliver_later(std::move(again), rng);
      }
    }
    if (rng.chance(rates_.lose_reply)) {
      stats_->add(Stat::lost_replies);
      dropped();
      return lost(true);
    }
    if (rng.chance(rates_.delay_reply)) {
      stats_->add(Stat::delayed_replies);
      const Duration d = rates_.long_delay;
      task.held_up += d;
      scheduler_->sleep_for(d);
    }
    pause(task, rng);
    if (task.dead || generation != generation_) {
      dropped();
      return lost(true);
    }
    return answer;
  }

 private:
  void pause(Task& task, Rng& rng) {
    if (rates_.latency > 0 && rng.chance(rates_.latency)) {
      stats_->add(Stat::latencies);
      const auto d = Duration(rng.between(1, rates_.max_latency.count()));
      task.held_up += d;
      scheduler_->sleep_for(d);
    } else {
      scheduler_->yield();
    }
  }

  // A fault ended the caller's connection; the backend may have to roll back what it had open.
  void dropped() {
    if constexpr (requires { backend_->connection_dropped(); }) backend_->connection_dropped();
  }

  template <class Again>
  void deliver_later(Again again, Rng& rng) {
    const auto delay = std::chrono::milliseconds(rng.between(0, 60));
    scheduler_->spawn(kNetwork, "duplicate", [this, again = std::move(again), delay]() mutable {
      scheduler_->sleep_for(delay);
      if (down() || scheduler_->current()->dead) return;
      again();
      dropped();  // the copy's connection ends with it: what it opened rolls back
    });
  }

  Scheduler* scheduler_;
  Backend* backend_;
  FaultRates rates_;
  Stats* stats_;
  Time down_until_{};
  std::uint64_t generation_ = 0;
};

/// A store call's answer when its caller never hears back.
inline Status lost_status(bool maybe_ran, bool commit) {
  if (commit && maybe_ran) return Status(errc::outcome_unknown, "sim: the reply was lost");
  return Status(errc::store_unavailable, "sim: the call did not get through");
}

/// One process's connection: the store calls of idem::Store and its extensions, through the
/// network to the backend.
template <class Backend>
class Link {
 public:
  explicit Link(Network<Backend>& network) : network_(&network) {}

  Result<Claim> claim(const ClaimRequest& request) {
    return network_->rpc(
        [&] { return backend().claim(request); },
        [](bool) -> Result<Claim> { return lost_status(false, false).failure(); },
        [&] {
          return std::function<void()>([this, key = std::string(request.key), r = request] {
            ClaimRequest copy = r;
            copy.key = key;
            (void)backend().claim(copy);
          });
        });
  }
  Status commit(const Ticket& ticket, const Completion& completion) {
    return network_->rpc(
        [&] { return backend().commit(ticket, completion); },
        [](bool ran) { return lost_status(ran, true); },
        [&] {
          return std::function<void()>([this, key = std::string(ticket.key), f = ticket.fence,
                                        bytes = std::string(completion.result), c = completion] {
            Completion copy = c;
            copy.result = bytes;
            (void)backend().commit(Ticket{key, f}, copy);
          });
        });
  }
  Status abort(const Ticket& ticket) {
    return network_->rpc(
        [&] { return backend().abort(ticket); }, [](bool ran) { return lost_status(ran, false); },
        [&] {
          return std::function<void()>([this, key = std::string(ticket.key), f = ticket.fence] {
            (void)backend().abort(Ticket{key, f});
          });
        });
  }
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease) {
    return network_->rpc([&] { return backend().extend(ticket, lease); },
                         [](bool ran) { return lost_status(ran, false); },
                         [&] {
                           return std::function<void()>(
                               [this, key = std::string(ticket.key), f = ticket.fence, lease] {
                                 (void)backend().extend(Ticket{key, f}, lease);
                               });
                         });
  }
  Status rewind(const Ticket& ticket) requires RewindableStore<Backend> {
    return network_->rpc([&] { return backend().rewind(ticket); },
                         [](bool ran) { return lost_status(ran, false); },
                         [] { return std::function<void()>(); });
  }
  Result<std::vector<StepRecord>> load_steps(const Ticket& ticket) requires StepStore<Backend> {
    return network_->rpc(
        [&] { return backend().load_steps(ticket); },
        [](bool) -> Result<std::vector<StepRecord>> { return lost_status(false, false).failure(); },
        [] { return std::function<void()>(); });
  }
  Status save_step(const Ticket& ticket, const StepWrite& step) requires StepStore<Backend> {
    return network_->rpc([&] { return backend().save_step(ticket, step); },
                         [](bool ran) { return lost_status(ran, false); },
                         [] { return std::function<void()>(); });
  }
  Status save_step_atomically(const Ticket& ticket, std::uint32_t index, std::string_view name,
                              AtomicStepBody body) requires AtomicStepStore<Backend> {
    return network_->rpc([&] { return backend().save_step_atomically(ticket, index, name, body); },
                         [](bool ran) { return lost_status(ran, false); },
                         [] { return std::function<void()>(); });
  }
  Status keep_request(const Ticket& ticket,
                      std::string_view request) requires CompletableStore<Backend> {
    return network_->rpc([&] { return backend().keep_request(ticket, request); },
                         [](bool ran) { return lost_status(ran, false); },
                         [] { return std::function<void()>(); });
  }
  Result<std::vector<Abandoned>> find_abandoned(std::string_view prefix, std::size_t limit) requires
      CompletableStore<Backend> {
    return network_->rpc(
        [&] { return backend().find_abandoned(prefix, limit); },
        [](bool) -> Result<std::vector<Abandoned>> { return lost_status(false, false).failure(); },
        [] { return std::function<void()>(); });
  }
  std::vector<Result<Claim>> claim_batch(std::span<const ClaimRequest> requests) requires
      BatchStore<Backend> {
    return network_->rpc([&] { return backend().claim_batch(requests); },
                         [&](bool) {
                           return std::vector<Result<Claim>>(
                               requests.size(), Result<Claim>(lost_status(false, false).failure()));
                         },
                         [] { return std::function<void()>(); });
  }
  std::vector<Status> commit_batch(std::span<const CommitRequest> requests) requires
      BatchStore<Backend> {
    return network_->rpc(
        [&] { return backend().commit_batch(requests); },
        [&](bool ran) { return std::vector<Status>(requests.size(), lost_status(ran, true)); },
        [] { return std::function<void()>(); });
  }

 private:
  Backend& backend() { return network_->backend(); }
  Network<Backend>* network_;
};

}  // namespace idem::sim
