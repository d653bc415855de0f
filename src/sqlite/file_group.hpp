#pragma once
// The group commit of a SQLite file's lease-mode claims and commits in this process: callers
// queue, and the one whose turn it is writes the calls queued behind it in one write transaction
// (GroupCommitStore is the engine), on its own store's connection. Shared by the stores of the
// process on one file with the same table prefix and settings (file_writers.hpp's per_file).

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "idem/batch_store.hpp"
#include "idem/group_commit_store.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem {
struct SqliteStoreOptions;
}  // namespace idem

namespace idem::sql {

class Engine;  // engine.hpp

/// The store calls a group writes, run on the engine of the store whose caller writes the group
/// (set for the calling thread by FileGroup::Writing): any store of the file and prefix writes
/// the same rows, and the writing caller's store outlives its call.
class WritingEngine {
 public:
  Result<Claim> claim(const ClaimRequest& request);
  Status commit(const Ticket& ticket, const Completion& completion);
  Status abort(const Ticket& ticket);
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease);
  std::vector<Result<Claim>> claim_batch(std::span<const ClaimRequest> requests);
  std::vector<Status> commit_batch(std::span<const CommitRequest> requests);
  GroupAnswers write_group(std::span<const CommitRequest> commits,
                           std::span<const ClaimRequest> claims);

  /// The engine of the calling thread's store while it is in a grouped call.
  class Scope {
   public:
    explicit Scope(Engine& engine) noexcept;
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope();

   private:
    Engine* previous_;
  };

 private:
  static Engine& current();
};

struct FileGroup {
  // Callers stay runnable for up to a group's time (at most 2 ms) before they sleep: a group is
  // written on a CPU of this process, and on two cores shared by eight callers the sleeps and
  // wake-ups were most of a call's cost (docs/batches.md).
  explicit FileGroup(std::chrono::milliseconds max_queue_wait)
      : calls(writing, GroupCommitOptions{.max_queue_wait = max_queue_wait,
                                          .spin_wait = std::chrono::microseconds{2000}}) {}
  FileGroup(const FileGroup&) = delete;
  FileGroup& operator=(const FileGroup&) = delete;

  WritingEngine writing;
  GroupCommitStore<WritingEngine> calls;  // after `writing`, which it writes through
};

/// The group of the stores of this process with these options' file, prefix and settings; null
/// when the store does not group (transactional mode, or a zero busy_timeout: no waiting).
std::shared_ptr<FileGroup> file_group(const SqliteStoreOptions& options);

}  // namespace idem::sql
