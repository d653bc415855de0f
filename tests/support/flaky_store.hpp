#pragma once
// FlakyStore: a MemoryStore whose next claims, commits or aborts fail on demand, to drive the
// guard's failure paths deterministically. Everything else is the real store. A commit can
//   fail          not run, answered store_unavailable (the store was not reached);
//   lose_request  not run, answered outcome_unknown (cut on its way: the caller cannot know);
//   lose_reply    run, then answered outcome_unknown (its answer lost on the way back).

#include <atomic>
#include <deque>
#include <initializer_list>
#include <mutex>

#include "idem/idem.hpp"

namespace idem::testing {

class FlakyStore {
 public:
  enum class CommitFault { none, fail, lose_request, lose_reply };

  explicit FlakyStore(MemoryStoreOptions options = {}) : inner_(std::move(options)) {}

  std::atomic<int> failing_claims{0};
  std::atomic<int> failing_commits{0};
  std::atomic<int> failing_aborts{0};       // not run, answered store_unavailable
  std::atomic<int> lost_commit_replies{0};  // applied by the store, then answered outcome_unknown
  std::atomic<int> commit_calls{0};
  std::atomic<int> abort_calls{0};

  /// The faults of the next commits, one per call in order; the counters above apply after.
  void next_commits(std::initializer_list<CommitFault> faults) {
    std::lock_guard lock(mutex_);
    scripted_.insert(scripted_.end(), faults);
  }

  Result<Claim> claim(const ClaimRequest& request) {
    if (take(failing_claims))
      return make_failure(errc::store_unavailable, "injected claim failure");
    return inner_.claim(request);
  }
  Status commit(const Ticket& ticket, const Completion& completion) {
    commit_calls.fetch_add(1);
    CommitFault fault = next_scripted();
    if (fault == CommitFault::none) {
      if (take(failing_commits)) fault = CommitFault::fail;
    }
    if (fault == CommitFault::fail) {
      return Status(errc::store_unavailable, "injected commit failure");
    }
    if (fault == CommitFault::lose_request) {
      return Status(errc::outcome_unknown, "injected loss of the commit on its way");
    }
    Status status = inner_.commit(ticket, completion);
    if (status.ok() && (fault == CommitFault::lose_reply || take(lost_commit_replies))) {
      return Status(errc::outcome_unknown, "injected loss of the commit's reply");
    }
    return status;
  }
  Status abort(const Ticket& ticket) {
    abort_calls.fetch_add(1);
    if (take(failing_aborts)) return Status(errc::store_unavailable, "injected abort failure");
    return inner_.abort(ticket);
  }
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease) {
    return inner_.extend(ticket, lease);
  }
  MemoryStore& inner() { return inner_; }

 private:
  static bool take(std::atomic<int>& budget) {
    int n = budget.load();
    while (n > 0 && !budget.compare_exchange_weak(n, n - 1)) {
    }
    return n > 0;
  }
  CommitFault next_scripted() {
    std::lock_guard lock(mutex_);
    if (scripted_.empty()) return CommitFault::none;
    const CommitFault f = scripted_.front();
    scripted_.pop_front();
    return f;
  }

  MemoryStore inner_;
  std::mutex mutex_;
  std::deque<CommitFault> scripted_;
};

}  // namespace idem::testing
