#pragma once
// The simulated record server in lease mode: the library's own MemoryStore (the record model
// every store follows: detail::classify and detail::check_fence) on the virtual clock, shared
// by every simulated process as a database server would be. Each call that reaches it is one
// atomic step, checked against the contract as it runs. It also keeps the downstream database
// the handlers' atomic steps write to, and can restart: durable (records kept) or volatile (a
// memory store whose process restarted: every record gone).

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "idem/batch_store.hpp"
#include "idem/memory/admin.hpp"
#include "idem/memory/store.hpp"
#include "idem/steps.hpp"
#include "sim/contract.hpp"
#include "sim/database.hpp"
#include "sim/scheduler.hpp"
#include "sim/trace.hpp"

namespace idem::sim {

class Server {
 public:
  Server(Scheduler& scheduler, std::shared_ptr<Clock> clock, Contract& contract, Database& database,
         Trace& trace);

  Result<Claim> claim(const ClaimRequest& request);
  Status commit(const Ticket& ticket, const Completion& completion);
  Status abort(const Ticket& ticket);
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease);
  Result<std::vector<StepRecord>> load_steps(const Ticket& ticket);
  Status save_step(const Ticket& ticket, const StepWrite& step);
  /// The step's writes and its record in one transaction of the server's own.
  Status save_step_atomically(const Ticket& ticket, std::uint32_t index, std::string_view name,
                              AtomicStepBody body);
  Status keep_request(const Ticket& ticket, std::string_view request);
  Result<std::vector<Abandoned>> find_abandoned(std::string_view prefix, std::size_t limit);
  std::vector<Result<Claim>> claim_batch(std::span<const ClaimRequest> requests);
  std::vector<Status> commit_batch(std::span<const CommitRequest> requests);

  // The admin's operations (each one step).
  Result<admin::Change> release(std::string_view scope, const Key& key, Fence only_fence);
  Result<admin::Change> forget(std::string_view scope, const Key& key);
  Result<std::size_t> purge();

  /// A volatile restart: a new, empty store (fences start again).
  void wipe();

 private:
  Scheduler* scheduler_;
  std::shared_ptr<Clock> clock_;
  Contract* contract_;
  Database* database_;
  Trace* trace_;
  std::unique_ptr<MemoryStore> store_;
  std::unique_ptr<admin::MemoryAdmin> admin_;
};

}  // namespace idem::sim
