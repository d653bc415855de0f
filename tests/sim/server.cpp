#include "sim/server.hpp"

#include <utility>

namespace idem::sim {

namespace {
std::string answer_text(const Status& s) { return s ? "ok" : s.failure().describe(); }
std::string answer_text(const Result<Claim>& r) {
  return r ? claim_text(r.value()) : r.failure().describe();
}

MemoryStoreOptions store_options(std::shared_ptr<Clock> clock) {
  return MemoryStoreOptions{.shards = 1, .capacity = 0, .clock = std::move(clock)};
}
}  // namespace

Server::Server(Scheduler& scheduler, std::shared_ptr<Clock> clock, Contract& contract,
               Database& database, Trace& trace)
    : scheduler_(&scheduler),
      clock_(std::move(clock)),
      contract_(&contract),
      database_(&database),
      trace_(&trace),
      store_(std::make_unique<MemoryStore>(store_options(clock_))),
      admin_(std::make_unique<admin::MemoryAdmin>(*store_)) {}

Result<Claim> Server::claim(const ClaimRequest& request) {
  Result<Claim> answer = store_->claim(request);
  if (trace_->on())
    trace_->add(*scheduler_,
                "store: claim " + printable(request.key) + " -> " + answer_text(answer));
  contract_->claim(request, answer, scheduler_->now());
  return answer;
}

Status Server::commit(const Ticket& ticket, const Completion& completion) {
  Status answer = store_->commit(ticket, completion);
  if (trace_->on())
    trace_->add(*scheduler_, "store: commit " + printable(ticket.key) + " fence " +
                                 std::to_string(ticket.fence) + " " +
                                 std::string(completion.result) + " -> " + answer_text(answer));
  contract_->commit(ticket, completion, answer, scheduler_->now());
  return answer;
}

Status Server::abort(const Ticket& ticket) {
  Status answer = store_->abort(ticket);
  if (trace_->on())
    trace_->add(*scheduler_, "store: abort " + printable(ticket.key) + " fence " +
                                 std::to_string(ticket.fence) + " -> " + answer_text(answer));
  contract_->abort(ticket, answer, scheduler_->now());
  return answer;
}

Status Server::extend(const Ticket& ticket, std::chrono::milliseconds lease) {
  Status answer = store_->extend(ticket, lease);
  if (trace_->on())
    trace_->add(*scheduler_, "store: extend " + printable(ticket.key) + " fence " +
                                 std::to_string(ticket.fence) + " -> " + answer_text(answer));
  contract_->extend(ticket, lease, answer, scheduler_->now());
  return answer;
}

Result<std::vector<StepRecord>> Server::load_steps(const Ticket& ticket) {
  Result<std::vector<StepRecord>> answer = store_->load_steps(ticket);
  if (trace_->on()) {
    trace_->add(*scheduler_, "store: load steps of " + printable(ticket.key) + " fence " +
                                 std::to_string(ticket.fence) + " -> " +
                                 (answer ? std::to_string(answer->size()) + " steps"
                                         : answer.failure().describe()));
  }
  contract_->load_steps(ticket, answer, scheduler_->now());
  return answer;
}

Status Server::save_step(const Ticket& ticket, const StepWrite& step) {
  Status answer = store_->save_step(ticket, step);
  if (trace_->on())
    trace_->add(*scheduler_, "store: save step " + std::to_string(step.index) + " of " +
                                 printable(ticket.key) + " fence " + std::to_string(ticket.fence) +
                                 " -> " + answer_text(answer));
  contract_->save_step(ticket, step, answer, scheduler_->now());
  return answer;
}

Status Server::save_step_atomically(const Ticket& ticket, std::uint32_t index,
                                    std::string_view name, AtomicStepBody body) {
  SimTransaction transaction;
  std::string result;
  if (!body.run(body.state, NativeTransaction(transaction), result)) {
    return make_failure(errc::handler_failed, "the step failed; its writes were rolled back");
  }
  Status saved = save_step(ticket, StepWrite{index, name, result});
  if (saved) database_->commit(transaction.writes);
  return saved;
}

Status Server::keep_request(const Ticket& ticket, std::string_view request) {
  Status answer = store_->keep_request(ticket, request);
  if (trace_->on())
    trace_->add(*scheduler_, "store: keep the request of " + printable(ticket.key) + " fence " +
                                 std::to_string(ticket.fence) + " -> " + answer_text(answer));
  contract_->keep_request(ticket, request, answer, scheduler_->now());
  return answer;
}

Result<std::vector<Abandoned>> Server::find_abandoned(std::string_view prefix, std::size_t limit) {
  Result<std::vector<Abandoned>> answer = store_->find_abandoned(prefix, limit);
  contract_->find_abandoned(prefix, answer, scheduler_->now());
  return answer;
}

std::vector<Result<Claim>> Server::claim_batch(std::span<const ClaimRequest> requests) {
  std::vector<Result<Claim>> answers;
  answers.reserve(requests.size());
  for (const ClaimRequest& r : requests) answers.push_back(claim(r));
  return answers;
}

std::vector<Status> Server::commit_batch(std::span<const CommitRequest> requests) {
  std::vector<Status> answers;
  answers.reserve(requests.size());
  for (const CommitRequest& r : requests) answers.push_back(commit(r.ticket, r.completion));
  return answers;
}

Result<admin::Change> Server::release(std::string_view scope, const Key& key, Fence only_fence) {
  Result<admin::Change> change = admin_->release(scope, key, only_fence);
  if (change) {
    contract_->release(admin::detail::effective_key(scope, key), only_fence, change->changed,
                       scheduler_->now());
  }
  return change;
}

Result<admin::Change> Server::forget(std::string_view scope, const Key& key) {
  Result<admin::Change> change = admin_->forget(scope, key);
  if (change) {
    contract_->forget(admin::detail::effective_key(scope, key), change->changed, scheduler_->now());
  }
  return change;
}

Result<std::size_t> Server::purge() {
  Result<std::size_t> purged = admin_->purge_expired(0);
  if (purged) {
    contract_->purge(scheduler_->now(), [&](const std::string& key) {
      // The key's record is still there when the admin finds it (any scope).
      std::size_t pos = 0;
      std::size_t n = 0;
      if (!admin::detail::read_varint(key, pos, n) || n > key.size() - pos) return false;
      const std::string scope = key.substr(pos, n);
      std::string principal;
      std::string id;
      if (!admin::detail::split_key(key, scope, principal, id)) return false;
      Result<std::optional<admin::RecordInfo>> found = admin_->inspect(scope, Key{id, principal});
      return found && found->has_value();
    });
  }
  return purged;
}

void Server::wipe() {
  admin_.reset();
  store_ = std::make_unique<MemoryStore>(store_options(clock_));
  admin_ = std::make_unique<admin::MemoryAdmin>(*store_);
  contract_->wipe();
}

}  // namespace idem::sim
