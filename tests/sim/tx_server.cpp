#include "sim/tx_server.hpp"

#include <algorithm>
#include <utility>

#include "idem/error.hpp"
#include "sim/mutants.hpp"

namespace idem::sim {

using detail::RecordState;

TxServer::TxServer(Scheduler& scheduler, Contract& contract, Database& database, Stats& stats,
                   Trace& trace)
    : scheduler_(&scheduler),
      contract_(&contract),
      database_(&database),
      stats_(&stats),
      trace_(&trace) {}

detail::RecordView<> TxServer::view(const Row& row) const {
  detail::RecordView<> v;
  v.state = row.state;
  v.fingerprint = row.fingerprint;
  v.fence = row.fence;
  if (row.state == RecordState::completed || row.state == RecordState::failed) {
    v.expires_in = row.expires_at - scheduler_->now();
  }
  v.result = row.result;
  return v;
}

TxServer::Txn* TxServer::open_txn(std::string_view key, Fence fence) {
  for (auto& t : txns_) {
    if (t->open && t->key == key && t->fence == fence) return t.get();
  }
  return nullptr;
}

Status TxServer::gone(std::string_view key, Fence fence) const {
  const auto it = failed_.find(std::pair<std::string, Fence>{std::string(key), fence});
  if (it != failed_.end()) return it->second;
  return Status(errc::lease_lost, "the record is no longer held under this fence");
}

void TxServer::roll_back(Txn& txn) {
  trace_->add(*scheduler_, "tx store: fence " + std::to_string(txn.fence) + " rolls back");
  txn.open = false;
  contract_->rolled_back(txn.key, txn.fence);
}

Result<Claim> TxServer::claim(const ClaimRequest& request) {
  Result<Claim> answer = [&]() -> Result<Claim> {
    for (auto& t : txns_) {
      if (t->open && t->key == request.key) {
        // The row is locked by an open transaction: the claim waits on it, then gives up.
        return Claim{.status = ClaimStatus::in_progress, .fence = t->fence};
      }
    }
    const auto row = rows_.find(request.key);
    const Row empty;
    Claim c = detail::classify(view(row == rows_.end() ? empty : row->second), request.fingerprint);
    if (c.status != ClaimStatus::acquired) return c;
    auto txn = std::make_unique<Txn>();
    txn->key = std::string(request.key);
    txn->fence = ++sequence_;
    txn->owner = scheduler_->current()->id;
    txn->process = scheduler_->current()->process;
    txn->fingerprint = request.fingerprint;
    txns_.push_back(std::move(txn));
    Txn& t = *txns_.back();
    return Claim{.status = ClaimStatus::acquired,
                 .fence = t.fence,
                 .transaction = NativeTransaction(t.writes)};
  }();
  if (trace_->on()) {
    trace_->add(*scheduler_,
                "tx store: claim " + printable(request.key) + " -> " +
                    (answer ? claim_text(answer.value()) : answer.failure().describe()));
  }
  contract_->claim(request, answer, scheduler_->now());
  return answer;
}

Status TxServer::commit(const Ticket& ticket, const Completion& completion) {
  if (trace_->on()) {
    trace_->add(*scheduler_, "tx store: commit " + printable(ticket.key) + " fence " +
                                 std::to_string(ticket.fence) + " " + printable(completion.result));
  }
  Status answer;
  if (Txn* t = open_txn(ticket.key, ticket.fence)) {
    Row& row = rows_[t->key];
    row.state = detail::finished_state(completion.status);
    row.fingerprint = t->fingerprint;
    row.fence = t->fence;
    row.expires_at = scheduler_->now() + completion.ttl;
    row.result = std::string(completion.result);
    t->open = false;
    contract_->commit(ticket, completion, answer, scheduler_->now());
    database_->commit(t->writes.writes);
    return answer;
  }
  for (auto& t : txns_) {
    if (t->open && t->key == ticket.key) {
      // Another holder's transaction locks the row: the fenced update waits, then gives up.
      answer = Status(errc::store_unavailable, "the record's row is locked by another holder");
      contract_->commit(ticket, completion, answer, scheduler_->now());
      return answer;
    }
  }
  const auto row = rows_.find(ticket.key);
  const Row empty;
  const detail::FenceCheck check = detail::check_fence(
      view(row == rows_.end() ? empty : row->second), ticket.fence, &completion);
  if (check != detail::FenceCheck::landed) answer = gone(ticket.key, ticket.fence);
  contract_->commit(ticket, completion, answer, scheduler_->now());
  return answer;
}

Status TxServer::abort(const Ticket& ticket) {
  trace_->add(*scheduler_, "tx store: abort fence " + std::to_string(ticket.fence));
  Status answer;
  Txn* t = open_txn(ticket.key, ticket.fence);
  if (t == nullptr) answer = gone(ticket.key, ticket.fence);
  contract_->abort(ticket, answer, scheduler_->now());
  if (t != nullptr) t->open = false;
  return answer;
}

Status TxServer::extend(const Ticket& ticket, std::chrono::milliseconds lease) {
  Status answer;
  if (open_txn(ticket.key, ticket.fence) == nullptr) answer = gone(ticket.key, ticket.fence);
  contract_->extend(ticket, lease, answer, scheduler_->now());
  return answer;
}

Status TxServer::rewind(const Ticket& ticket) {
  Txn* t = open_txn(ticket.key, ticket.fence);
  if (t == nullptr) return gone(ticket.key, ticket.fence);
  trace_->add(*scheduler_, "tx store: fence " + std::to_string(ticket.fence) +
                               " rewinds to its claim's savepoint");
  t->writes.writes.resize(t->savepoint_writes);
  t->steps.clear();
  contract_->rewound(ticket.key, ticket.fence);
  return {};
}

Result<std::vector<StepRecord>> TxServer::load_steps(const Ticket& ticket) {
  Txn* t = open_txn(ticket.key, ticket.fence);
  Result<std::vector<StepRecord>> answer =
      t == nullptr ? Result<std::vector<StepRecord>>(gone(ticket.key, ticket.fence).failure())
                   : Result<std::vector<StepRecord>>(t->steps);
  contract_->load_steps(ticket, answer, scheduler_->now());
  return answer;
}

Status TxServer::save_step(const Ticket& ticket, const StepWrite& step) {
  Txn* t = open_txn(ticket.key, ticket.fence);
  Status answer;
  if (t == nullptr) {
    answer = gone(ticket.key, ticket.fence);
  } else if (step.index > t->steps.size()) {
    answer = Status(errc::step_mismatch, "a step saved before the steps ahead of it");
  } else {
    t->steps.resize(step.index);
    t->steps.push_back(StepRecord{std::string(step.name), std::string(step.result)});
  }
  contract_->save_step(ticket, step, answer, scheduler_->now());
  return answer;
}

Status TxServer::save_step_atomically(const Ticket& ticket, std::uint32_t index,
                                      std::string_view name, AtomicStepBody body) {
  Txn* t = open_txn(ticket.key, ticket.fence);
  if (t == nullptr) return gone(ticket.key, ticket.fence);
  // The step runs inside the handler's transaction, behind a savepoint of its own.
  const std::size_t savepoint = t->writes.writes.size();
  std::string result;
  if (!body.run(body.state, NativeTransaction(t->writes), result)) {
    if (!IDEM_SIM_MUTATE(kMutantAtomicStepKeepsWrites)) t->writes.writes.resize(savepoint);
    return make_failure(errc::handler_failed, "the step failed; its writes were rolled back");
  }
  return save_step(ticket, StepWrite{index, name, result});
}

void TxServer::connection_dropped() {
  const int task = scheduler_->current()->id;
  for (auto& t : txns_) {
    if (!t->open || t->owner != task) continue;
    failed_[{t->key, t->fence}] =
        Status(errc::store_unavailable, "the connection dropped; its transaction rolled back");
    roll_back(*t);
  }
}

void TxServer::crash(int process) {
  for (auto& t : txns_) {
    if (t->open && t->process == process) roll_back(*t);
  }
}

bool TxServer::drop_session(std::uint64_t pick) {
  std::vector<Txn*> open;
  for (auto& t : txns_) {
    if (t->open) open.push_back(t.get());
  }
  if (open.empty()) return false;
  Txn& t = *open[pick % open.size()];
  failed_[{t.key, t.fence}] = Status(errc::store_unavailable,
                                     "the database ended the session; its transaction rolled back");
  roll_back(t);
  trace_->add(*scheduler_, "the database ends the session of fence " + std::to_string(t.fence));
  return true;
}

}  // namespace idem::sim
