#pragma once
// FlakyStore: a MemoryStore whose next claims or commits fail with store_unavailable, or whose
// next commits land and then lose their answer (reported as store_unavailable, as a connection
// cut after the server ran the call would be), to drive the guard's failure paths
// deterministically. Everything else is the real store.

#include <atomic>

#include "idem/idem.hpp"

namespace idem::testing {

class FlakyStore {
 public:
  explicit FlakyStore(MemoryStoreOptions options = {}) : inner_(std::move(options)) {}

  std::atomic<int> failing_claims{0};
  std::atomic<int> failing_commits{0};
  std::atomic<int> lost_commit_replies{0};  // applied by the store, then answered as a failure
  std::atomic<int> commit_calls{0};
  std::atomic<int> abort_calls{0};

  Result<Claim> claim(const ClaimRequest& request) {
    if (take(failing_claims))
      return make_failure(errc::store_unavailable, "injected claim failure");
    return inner_.claim(request);
  }
  Status commit(const Ticket& ticket, const Completion& completion) {
    commit_calls.fetch_add(1);
    if (take(failing_commits)) return Status(errc::store_unavailable, "injected commit failure");
    Status status = inner_.commit(ticket, completion);
    if (status.ok() && take(lost_commit_replies)) {
      return Status(errc::store_unavailable, "injected loss of the commit's reply");
    }
    return status;
  }
  Status abort(const Ticket& ticket) {
    abort_calls.fetch_add(1);
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
  MemoryStore inner_;
};

}  // namespace idem::testing
