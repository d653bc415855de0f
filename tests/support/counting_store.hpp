#pragma once
// CountingStore: a MemoryStore that counts its calls and keeps the lease of the last claim, so a
// test can tell how many store round trips a call cost and what it asked for.

#include <atomic>
#include <chrono>

#include "idem/idem.hpp"

namespace idem::testing {

class CountingStore {
 public:
  explicit CountingStore(MemoryStoreOptions options = {}) : inner_(std::move(options)) {}

  std::atomic<int> claims{0};
  std::atomic<int> commits{0};
  std::atomic<int> aborts{0};
  std::atomic<int> extends{0};
  std::atomic<std::chrono::milliseconds::rep> last_claim_lease_ms{0};

  Result<Claim> claim(const ClaimRequest& request) {
    claims.fetch_add(1);
    last_claim_lease_ms.store(request.lease.count());
    return inner_.claim(request);
  }
  Status commit(const Ticket& ticket, const Completion& completion) {
    commits.fetch_add(1);
    return inner_.commit(ticket, completion);
  }
  Status abort(const Ticket& ticket) {
    aborts.fetch_add(1);
    return inner_.abort(ticket);
  }
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease) {
    extends.fetch_add(1);
    return inner_.extend(ticket, lease);
  }

  MemoryStore& inner() noexcept { return inner_; }

 private:
  MemoryStore inner_;
};

}  // namespace idem::testing
