#pragma once
// What the simulated processes run against: a record server (the simulated one in lease mode,
// the simulated transactional one, or a real store) behind the simulated network, and how the
// world's events reach it (a restart, a wipe, a dropped session, a crashed process's sessions,
// the admin's operations).

#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>

#include "idem/admin.hpp"
#include "idem/key.hpp"
#include "sim/network.hpp"
#include "sim/process.hpp"
#include "sim/scenario.hpp"
#include "sim/scheduler.hpp"

namespace idem::sim {

class Backend {
 public:
  virtual ~Backend() = default;

  /// A new incarnation of a process of `plan`.
  virtual std::unique_ptr<Process> make_process(World& world, int id, const ProcessPlan& plan) = 0;
  /// The server restarts, its records kept: down until `until`, replies in flight lost.
  virtual void restart(Time until) = 0;
  virtual bool down() const = 0;
  /// A volatile restart: every record gone (false where the store keeps them).
  virtual bool wipe() { return false; }
  /// The database ends one open session (transactional mode); false if none.
  virtual bool drop_session(std::uint64_t pick) {
    (void)pick;
    return false;
  }
  /// The sessions of a crashed process end.
  virtual void crashed(int process) { (void)process; }
  /// The admin's operations, each checked against the contract (a failure where the store has
  /// no admin).
  virtual Result<admin::Change> release(std::string_view scope, const Key& key) = 0;
  virtual Result<admin::Change> forget(std::string_view scope, const Key& key) = 0;
  virtual Result<std::size_t> purge() = 0;
};

/// A backend over the server type S (Server, TxServer, or a real store behind RealServer).
template <class S>
class BackendOf final : public Backend {
 public:
  template <class... Args>
  BackendOf(Scheduler& scheduler, const FaultRates& faults, Stats& stats, Args&&... server)
      : server_(std::forward<Args>(server)...), network_(scheduler, server_, faults, stats) {}

  S& server() noexcept { return server_; }
  Network<S>& network() noexcept { return network_; }

  std::unique_ptr<Process> make_process(World& world, int id, const ProcessPlan& plan) override {
    using Link = sim::Link<S>;
    if constexpr (BatchStore<Link>) {
      if (plan.group) return std::make_unique<ProcessOf<GroupStack<S>>>(world, id, network_, plan);
    }
    if (plan.cache) return std::make_unique<ProcessOf<CachedStack<S>>>(world, id, network_, plan);
    return std::make_unique<ProcessOf<DirectStack<S>>>(world, id, network_, plan);
  }
  void restart(Time until) override {
    network_.restart(until);
    while (drop_session(0)) {
    }
  }
  bool down() const override { return network_.down(); }
  bool wipe() override {
    if constexpr (requires { server_.wipe(); }) {
      server_.wipe();
      return true;
    } else {
      return false;
    }
  }
  bool drop_session(std::uint64_t pick) override {
    if constexpr (requires { server_.drop_session(pick); }) {
      return server_.drop_session(pick);
    } else {
      return false;
    }
  }
  void crashed(int process) override {
    if constexpr (requires { server_.crash(process); }) server_.crash(process);
  }
  Result<admin::Change> release(std::string_view scope, const Key& key) override {
    if constexpr (requires { server_.release(scope, key, Fence{0}); }) {
      return server_.release(scope, key, Fence{0});
    } else {
      return make_failure(errc::store_unavailable, "no admin");
    }
  }
  Result<admin::Change> forget(std::string_view scope, const Key& key) override {
    if constexpr (requires { server_.forget(scope, key); }) {
      return server_.forget(scope, key);
    } else {
      return make_failure(errc::store_unavailable, "no admin");
    }
  }
  Result<std::size_t> purge() override {
    if constexpr (requires { server_.purge(); }) {
      return server_.purge();
    } else {
      return make_failure(errc::store_unavailable, "no admin");
    }
  }

 private:
  S server_;
  Network<S> network_;
};

}  // namespace idem::sim
