#include <utility>

#include "idem/sql/store.hpp"
#include "sql/engine.hpp"

namespace idem {

SqlStore::SqlStore(std::unique_ptr<sql::Engine> engine) : engine_(std::move(engine)) {}
SqlStore::SqlStore(SqlStore&&) noexcept = default;
SqlStore& SqlStore::operator=(SqlStore&&) noexcept = default;
SqlStore::~SqlStore() = default;

Result<Claim> SqlStore::claim(const ClaimRequest& request) { return engine_->claim(request); }
Status SqlStore::commit(const Ticket& ticket, const Completion& completion) {
  return engine_->commit(ticket, completion);
}
Status SqlStore::abort(const Ticket& ticket) { return engine_->abort(ticket); }
Status SqlStore::extend(const Ticket& ticket, std::chrono::milliseconds lease) {
  return engine_->extend(ticket, lease);
}
Status SqlStore::rewind(const Ticket& ticket) { return engine_->rewind(ticket); }
std::vector<Result<Claim>> SqlStore::claim_batch(std::span<const ClaimRequest> requests) {
  return engine_->claim_batch(requests);
}
std::vector<Status> SqlStore::commit_batch(std::span<const CommitRequest> requests) {
  return engine_->commit_batch(requests);
}
GroupAnswers SqlStore::write_group(std::span<const CommitRequest> commits,
                                   std::span<const ClaimRequest> claims) {
  return engine_->write_group(commits, claims);
}
Result<std::vector<StepRecord>> SqlStore::load_steps(const Ticket& ticket) {
  return engine_->load_steps(ticket);
}
Status SqlStore::save_step(const Ticket& ticket, const StepWrite& step) {
  return engine_->save_step(ticket, step);
}
Status SqlStore::keep_request(const Ticket& ticket, std::string_view request) {
  return engine_->keep_request(ticket, request);
}
Result<std::vector<Abandoned>> SqlStore::find_abandoned(std::string_view prefix,
                                                        std::size_t limit) {
  return engine_->find_abandoned(prefix, limit);
}
Status SqlStore::save_step_atomically(const Ticket& ticket, std::uint32_t index,
                                      std::string_view name, AtomicStepBody body) {
  return engine_->save_step_atomically(ticket, index, name, body);
}
Result<std::size_t> SqlStore::purge_expired(std::size_t max_rows) {
  return engine_->purge_expired(max_rows);
}
Status SqlStore::ensure_schema() { return engine_->ensure_schema(); }
SqlMode SqlStore::mode() const noexcept { return engine_->mode(); }

StoreStats SqlStore::stats() const noexcept { return engine_->stats(); }

}  // namespace idem
