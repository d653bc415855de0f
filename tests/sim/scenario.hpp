#pragma once
// A scenario: everything a run does that is not the schedule. The world (lease or
// transactional store, options, fault rates, event rates) and the callers: processes, each with
// actors, each running a list of operations (guard calls with their handlers' plans, batches,
// admin operations, completer passes). A seed makes one (generate); it prints as one line of
// text and reads back (to_text, parse), so that a failing run can be replayed and shrunk.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/contract.hpp"
#include "sim/network.hpp"

namespace idem::sim {

/// What a handler run does, in order: its steps, a pause, a lease renewal, a fenced write
/// downstream, a write in the store's transaction (transactional mode), then it returns its
/// value (or throws). Step i is named "s<i>" on every run; whether it is an atomic step
/// (Context::atomic_step) depends on the key and i alone (atomic_step_at), so that every run of
/// a key has the same steps.
struct HandlerPlan {
  int steps = 0;            // steps s0, s1, ...
  int fail_step = -1;       // the step whose body throws
  bool catch_step = false;  // the handler catches that throw and goes on
  int work_ms = 0;          // virtual time the handler takes before it returns
  bool extend = false;      // renews the lease after the work
  bool ledger = false;      // writes downstream under its fence (§10)
  bool throws = false;      // throws instead of returning
  bool big = false;         // returns a value over max_result_size
};

enum class OpKind : char {
  execute = 'e',    // guard.execute
  commit = 'c',     // begin, the handler, commit(value)
  fail = 'f',       // begin, the handler, fail(message)
  drop = 'd',       // begin, the handler, the Attempt destroyed while holding
  batch = 'b',      // guard.execute_batch over several items
  release = 'R',    // the admin releases a key
  forget = 'F',     // the admin forgets a key
  purge = 'P',      // the admin purges expired records
  completer = 'C',  // one pass of the completer
  layered = 'L',    // LayeredGuard: a request-ID cache in front of the record
};

struct Item {
  int key = 0;
  int payload = 0;
};

struct Op {
  OpKind kind = OpKind::execute;
  std::vector<Item> items;  // the key and payload (a batch: several)
  HandlerPlan handler;
  int pause_ms = 0;  // before the operation
  int request = 0;   // layered: the request id (a client's retries share one)
};

struct ActorPlan {
  std::vector<Op> ops;
};

struct ProcessPlan {
  bool cache = false;               // a CachedStore in front of the store
  bool group = false;               // a GroupCommitStore in front of the store
  std::size_t group_in_flight = 1;  // its groups written at once (GroupCommitOptions)
  std::vector<ActorPlan> actors;
};

struct Scenario {
  std::uint64_t seed = 0;  // the schedule's
  StoreMode mode = StoreMode::lease;
  bool volatile_store = false;  // a restart loses every record (a memory store's process)
  int lease_ms = 50;
  int ttl_ms = 200;
  bool remember_failures = false;
  int wait_ms = 0;  // Wait{timeout}; 0: FailFast
  int commit_tries = 3;
  bool keep_request = false;  // Options::keep_request (for the completer)
  int keys = 2;
  int payloads = 1;
  FaultRates faults;
  // Per-mille chances per scheduling step of the world's events, and their caps.
  int crash_rate = 0;
  int restart_rate = 0;
  int jump_rate = 0;
  int drop_rate = 0;  // transactional mode: the database ends a session
  int max_events = 3;
  std::vector<ProcessPlan> processes;

  /// Operations in all (a measure for the shrinker).
  std::size_t size() const;
};

/// Whether step `index` of `key`'s handler is an atomic step.
constexpr bool atomic_step_at(int key, int index) noexcept { return (key + index) % 3 == 2; }

/// The scenario a seed makes.
Scenario generate(std::uint64_t seed);
std::string to_text(const Scenario& scenario);
/// The scenario `text` spells, or nullopt (with why in `error`).
std::optional<Scenario> parse(std::string_view text, std::string& error);

}  // namespace idem::sim
