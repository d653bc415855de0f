#pragma once
// Targets of the entity store tests (VersionStore, StateMachineStore): one per backend, each
// with the entities (orders, accounts), the handler effects, and the few reads and writes the
// handlers do. This file: what all share, and the memory target; sql_targets.hpp: SQLite and
// PostgreSQL, whose handlers write inside the claim's transaction.

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "idem/idem.hpp"
#include "idem/memory/entities.hpp"
#include "idem/state_machine_store.hpp"
#include "idem/version_store.hpp"
#include "support/order_machine.hpp"
#include "support/pg_env.hpp"
#include "support/unique_name.hpp"

namespace idem::testing {

// ---- memory target: effects and balances in maps; the entity lock protects them -----------------

class MemoryTarget {
 public:
  using Backend = MemoryBackend;
  static constexpr const char* kName = "memory";
  static constexpr bool kSql = false;

  bool set_up(std::string&) { return true; }
  Backend::Options connection() const { return {}; }

  // Entities are created through the store (put); the target keeps balances and effects.
  template <class Store>
  void create_order(Store& store, const std::string& id) {
    store.put(id, "CREATED");
  }
  template <class Store>
  void create_account(Store& store, const std::string& id, long long balance) {
    store.put(id, 0);
    std::lock_guard lock(mutex_);
    balances_[id] = balance;
  }
  long long balance(const std::string& id) {
    std::lock_guard lock(mutex_);
    return balances_[id];
  }
  long long effects(const std::string& what) {
    std::lock_guard lock(mutex_);
    return effects_[what];
  }
  void add_effect(Context&, const std::string& what) {
    std::lock_guard lock(mutex_);
    ++effects_[what];
  }
  long long read_balance(Context&, const std::string& id) { return balance(id); }
  void write_balance(Context&, const std::string& id, long long value) {
    std::lock_guard lock(mutex_);
    balances_[id] = value;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, long long> balances_;
  std::map<std::string, long long> effects_;
};

}  // namespace idem::testing
