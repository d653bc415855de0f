#pragma once
// One run of a scenario: the scheduler and its virtual clock, the record server (lease mode) or
// the transactional server, the network, the processes and their callers, the world's events
// (crashes, restarts, clock jumps, dropped sessions), and the checks: the contract at the
// store, the database, the ledger, and each guard call's outcome and events as it ends.

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "idem/context.hpp"
#include "idem/key.hpp"
#include "idem/observer.hpp"
#include "idem/options.hpp"
#include "idem/outcome.hpp"
#include "sim/checks.hpp"
#include "sim/contract.hpp"
#include "sim/database.hpp"
#include "sim/ledger.hpp"
#include "sim/network.hpp"
#include "sim/probe.hpp"
#include "sim/scenario.hpp"
#include "sim/scheduler.hpp"
#include "sim/stats.hpp"
#include "sim/trace.hpp"

namespace idem::sim {

class Backend;
class World;

struct RunOptions {
  bool trace = false;
  std::uint64_t max_steps = 40'000;
  /// The backend the processes run against; unset: the simulated server (lease mode) or the
  /// simulated transactional server, as the scenario says.
  std::function<std::unique_ptr<Backend>(World&)> backend;
  /// Time is the machine's: sleeps take real time (a real store's leases are on its clock).
  bool real_time = false;
  /// The contract's tolerance on time boundaries (a real store's clock is its own).
  Duration tolerance{};
  /// Whether the fence of a record that expired may start anywhere above the key's fences (a
  /// store that deletes expired records) rather than at the record's next.
  bool expiry_removes = false;
  /// Handlers write the simulated database through their transactions (a real store's
  /// transactions are its own: nothing is written there).
  bool sim_transactions = true;
  /// The store has atomic steps (idem::AtomicStepStore): some steps are atomic ones.
  bool atomic_steps = true;
  /// The guards' scope: runs sharing a real store's records each take their own.
  std::string scope = "sim";
  /// Where handlers write in transactional mode when not in the simulated database (a real
  /// store's transaction), and the check of those writes once the run is over.
  std::function<void(NativeTransaction, const Write&)> write_effect;
  std::function<void(const Contract&, Violations&)> check_effects;
};

struct RunReport {
  bool failed = false;
  Violation violation;
  std::uint64_t digest = 0;  // the schedule taken: equal digests, equal runs
  std::uint64_t steps = 0;
  Stats stats;
  std::vector<std::string> trace;
};

/// Runs `scenario` under its schedule seed.
RunReport run(const Scenario& scenario, const RunOptions& options = {});

class Process;

/// A guard call in progress on one task: what the checks at its end need.
struct CallState {
  bool active = false;
  int key = 0;
  int payload = 0;
  std::size_t items = 1;  // a batch: its items
  bool layered = false;   // a LayeredGuard call (events are per layer)
  std::string effective;  // the key's effective key
  Time start{};
  Duration held_start{};
  Duration jumped_start{};  // the clock's jumps so far, when the call began
  struct Answer {
    std::string effective;
    Fingerprint fingerprint;
    Claim claim;
  };
  std::vector<Answer> claims;    // every claim answer the guard got, in order
  int acquired = 0;              // claims that acquired
  int takeovers = 0;             // of them, takeovers
  std::array<int, 11> events{};  // observer events heard, by idem::Event
  std::error_code aborted;       // the last aborted event's error: how the failure settled
  struct Run {
    std::size_t item = 0;  // a batch's item
    std::string effective;
    std::uint64_t id = 0;
    Fence fence = 0;
    std::string value;
    std::uint64_t epoch = 0;  // the key's epoch as it ran (a wiped store reuses fences)
  };
  std::vector<Run> runs;
  Duration handler_time{};     // virtual time inside handlers
  Duration held_in_handler{};  // of the held-up time, inside handlers
};

class World final : public ClaimWatcher {
 public:
  World(const Scenario& scenario, const RunOptions& options);
  ~World() override;

  RunReport run();

  // --- For the processes and their callers ---------------------------------------------------
  const Scenario& scenario() const noexcept { return scenario_; }
  Scheduler& scheduler() noexcept { return scheduler_; }
  std::shared_ptr<Clock> clock() const noexcept { return clock_; }
  Stats& stats() noexcept { return stats_; }
  Trace& trace() noexcept { return trace_; }
  Violations& violations() noexcept { return violations_; }
  Backend& backend() noexcept { return *backend_; }
  Contract& contract_mut() noexcept { return contract_; }
  Database& database() noexcept { return database_; }
  const Contract& contract() const noexcept { return contract_; }

  /// The guard options every caller uses (scope "sim"); guard_options() adds the observer.
  const Options& options() const noexcept { return options_; }
  Options guard_options() const;

  std::string_view scope() const noexcept { return options_.scope; }
  Key key(int k) const;
  std::string payload(int key, int p) const;
  std::string effective(int k) const;

  /// The running task's call.
  CallState& call();
  void begin_call(int key, int payload, std::size_t items = 1);
  /// Checks one guard call's outcome as it ends (see world.cpp for each check).
  void end_call(const Outcome<std::string>& outcome);
  /// A LayeredGuard call; `cache_answered`: its request-ID layer answered.
  void end_layered(const Outcome<std::string>& outcome, bool cache_answered);
  /// A call whose handler threw (execute), or whose holder failed or dropped its attempt.
  void end_call_threw(const std::string& what);
  void end_call_settled(bool threw);
  /// A begin() whose holder called fail(), which said `said`.
  void end_call_failed(std::error_code said);
  /// One item of a batch (the call ends with the last).
  void end_batch_item(std::size_t item, int key, int payload, const Outcome<std::string>& outcome,
                      bool last);
  void observe(const EventInfo& event);
  /// The admin in process `process` forgot `key` (before the forget: `epoch`).
  void forgot(int key, int process, std::uint64_t epoch);
  /// How long a CachedStore keeps a record at most (CachedStoreOptions::max_ttl).
  std::chrono::milliseconds cache_max_ttl() const noexcept {
    return std::chrono::milliseconds(4 * scenario_.lease_ms);
  }

  /// The handler every caller runs (plan `plan`, on key `key`): see world.cpp.
  std::string handle(Context& ctx, const HandlerPlan& plan, int key, std::size_t item = 0);
  /// The completer's handler: the kept request names the key.
  std::string handle_kept(Context& ctx, std::string_view request);
  /// The dead task's handler stops here (its process crashed).
  void check_alive();
  /// A handler's (or atomic step's) write through its transaction.
  void write(NativeTransaction transaction, const Write& w);

  // ClaimWatcher
  void claimed(const ClaimRequest& request, const Result<Claim>& answer, bool from_cache) override;
  std::uint64_t calls_sent() const override;

 private:
  bool between();
  void crash(int process);
  void restart_process(int plan, Duration after);
  void spawn_actors(int plan, Process& process, bool resume);
  void jump_clock();
  void check_bound(const CallState& c, std::size_t items);
  void check_events(const CallState& c, const Outcome<std::string>* outcome, bool threw);
  void check_outcome(CallState& c, std::size_t item, const std::string& effective,
                     const Fingerprint& fingerprint, const Outcome<std::string>& out, bool batch);
  void check_cached_answer(const ClaimRequest& request, const Claim& answer);
  void check_settled(const CallState& c, std::size_t item, const std::string& effective,
                     std::error_code said);
  void step_ran(const std::string& effective, Fence fence, int index);
  std::unique_ptr<Process> make_process(int plan);

  Scenario scenario_;
  RunOptions run_options_;
  Violations violations_;
  Stats stats_;
  Scheduler scheduler_;
  std::shared_ptr<Clock> clock_;
  Trace trace_;
  Options options_;
  std::shared_ptr<Observer> observer_;
  Contract contract_;
  Database database_;
  Ledger ledger_;
  std::unique_ptr<Backend> backend_;
  std::vector<std::unique_ptr<Process>> processes_;  // every incarnation, dead ones too
  std::vector<int> incarnation_;                     // per process plan: its live one
  std::vector<std::vector<std::size_t>> next_op_;    // per plan and actor: the next operation
  std::deque<CallState> calls_;  // per task (a deque: references stay valid as it grows)
  struct Forget {
    std::string effective;
    Time at;
    int process;
    std::uint64_t epoch;  // the epoch it ended
  };
  std::vector<Forget> forgets_;
  std::uint64_t runs_ = 0;
  Duration jumped_{};  // the clock's jumps so far
  int events_left_ = 0;
};

}  // namespace idem::sim
