#include "sqlite/file_group.hpp"

#include <stdexcept>
#include <string>
#include <utility>

#include "idem/sqlite/store.hpp"
#include "sql/engine.hpp"
#include "sqlite/file_writers.hpp"

namespace idem::sql {

namespace {
thread_local Engine* writing_engine = nullptr;
}  // namespace

WritingEngine::Scope::Scope(Engine& engine) noexcept
    : previous_(std::exchange(writing_engine, &engine)) {}

WritingEngine::Scope::~Scope() { writing_engine = previous_; }

Engine& WritingEngine::current() {
  if (writing_engine == nullptr) {
    throw std::logic_error("idem: sqlite group commit written outside a store's call");
  }
  return *writing_engine;
}

Result<Claim> WritingEngine::claim(const ClaimRequest& request) { return current().claim(request); }
Status WritingEngine::commit(const Ticket& ticket, const Completion& completion) {
  return current().commit(ticket, completion);
}
Status WritingEngine::abort(const Ticket& ticket) { return current().abort(ticket); }
Status WritingEngine::extend(const Ticket& ticket, std::chrono::milliseconds lease) {
  return current().extend(ticket, lease);
}
std::vector<Result<Claim>> WritingEngine::claim_batch(std::span<const ClaimRequest> requests) {
  return current().claim_batch(requests);
}
std::vector<Status> WritingEngine::commit_batch(std::span<const CommitRequest> requests) {
  return current().commit_batch(requests);
}
GroupAnswers WritingEngine::write_group(std::span<const CommitRequest> commits,
                                        std::span<const ClaimRequest> claims) {
  return current().write_group(commits, claims);
}

std::shared_ptr<FileGroup> file_group(const SqliteStoreOptions& options) {
  if (options.mode != SqlMode::lease || options.busy_timeout.count() <= 0) return nullptr;
  // Stores that write the same rows with the same durability and bound share a group.
  const std::string variant = options.table_prefix + '\0' +
                              (options.synchronous_full ? "full" : "normal") + '\0' +
                              std::to_string(options.busy_timeout.count());
  return per_file<FileGroup>(options.path, variant,
                             [&] { return std::make_shared<FileGroup>(options.busy_timeout); });
}

}  // namespace idem::sql
