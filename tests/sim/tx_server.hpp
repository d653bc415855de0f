#pragma once
// The simulated record server in transactional mode, as the SQL stores run it
// (docs/design.md §9, §12): a claim that acquires opens a transaction on the caller's connection
// that holds the record's row until commit or abort; the handler writes through it; duplicates
// find the row held (in_progress) whatever the time. A connection that drops (a lost request or
// reply, a crash, the database ending the session) rolls back what it had open, and a later
// call under that holder's fence hears that failure again, never lease_lost. Fences come from a
// sequence no rollback returns. Its decisions use the library's record model
// (detail::classify, detail::check_fence) over the committed row.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/engine/record_model.hpp"
#include "idem/steps.hpp"
#include "idem/store.hpp"
#include "sim/contract.hpp"
#include "sim/database.hpp"
#include "sim/scheduler.hpp"
#include "sim/stats.hpp"
#include "sim/trace.hpp"

namespace idem::sim {

class TxServer {
 public:
  TxServer(Scheduler& scheduler, Contract& contract, Database& database, Stats& stats,
           Trace& trace);

  Result<Claim> claim(const ClaimRequest& request);
  Status commit(const Ticket& ticket, const Completion& completion);
  Status abort(const Ticket& ticket);
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease);
  Status rewind(const Ticket& ticket);
  Result<std::vector<StepRecord>> load_steps(const Ticket& ticket);
  Status save_step(const Ticket& ticket, const StepWrite& step);
  Status save_step_atomically(const Ticket& ticket, std::uint32_t index, std::string_view name,
                              AtomicStepBody body);

  /// The running task's connection dropped: what it had open rolls back.
  void connection_dropped();
  /// Every connection of `process`'s tasks ends (the process crashed).
  void crash(int process);
  /// The database ends one open session, picked by `pick` (a world event); false if none.
  bool drop_session(std::uint64_t pick);

 private:
  struct Row {
    detail::RecordState state = detail::RecordState::absent;
    Fingerprint fingerprint{};
    Fence fence = 0;
    Time expires_at{};
    std::string result;
  };
  struct Txn {
    std::string key;
    Fence fence = 0;
    int owner = 0;    // the task whose connection holds it
    int process = 0;  // that task's process
    bool open = true;
    Fingerprint fingerprint{};
    SimTransaction writes;
    std::vector<StepRecord> steps;
    std::size_t savepoint_writes = 0;  // the savepoint after the claim
  };

  Txn* open_txn(std::string_view key, Fence fence);
  Status gone(std::string_view key, Fence fence) const;
  void roll_back(Txn& txn);
  detail::RecordView<> view(const Row& row) const;

  Scheduler* scheduler_;
  Contract* contract_;
  Database* database_;
  Stats* stats_;
  Trace* trace_;
  Fence sequence_ = 0;
  std::map<std::string, Row, std::less<>> rows_;
  std::vector<std::unique_ptr<Txn>> txns_;  // every transaction, kept: handlers may still hold one
  std::map<std::pair<std::string, Fence>, Status, std::less<>> failed_;  // remembered failures
};

}  // namespace idem::sim
