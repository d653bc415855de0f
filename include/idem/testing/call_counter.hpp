#pragma once
// CallCounter<S>: a store over another (held by reference) that counts its calls, so a test can
// tell how many store calls a waiting duplicate cost. With Wakes = false it hides await_change:
// the guard then polls, as over a store that cannot wake. Part of the conformance kit
// (wake_cases.hpp) and usable in a store's own tests.

#include <atomic>
#include <chrono>

#include "idem/store.hpp"

namespace idem::testing {

template <class S, bool Wakes = true>
class CallCounter {
 public:
  explicit CallCounter(S& store) noexcept : store_(&store) {}

  std::atomic<int> claims{0};
  std::atomic<int> claims_after_wait{0};  // of them, claims saying ClaimRequest::after_wait
  std::atomic<int> commits{0};
  std::atomic<int> aborts{0};
  std::atomic<int> extends{0};
  std::atomic<int> awaits{0};    // await_change calls begun
  std::atomic<int> spurious{0};  // this many await_change calls return at once, as if woken

  int calls() const noexcept {
    return claims.load() + commits.load() + aborts.load() + extends.load() + awaits.load();
  }

  Result<Claim> claim(const ClaimRequest& request) {
    claims.fetch_add(1);
    if (request.after_wait) claims_after_wait.fetch_add(1);
    return store_->claim(request);
  }
  Status commit(const Ticket& ticket, const Completion& completion) {
    commits.fetch_add(1);
    return store_->commit(ticket, completion);
  }
  Status abort(const Ticket& ticket) {
    aborts.fetch_add(1);
    return store_->abort(ticket);
  }
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease) {
    extends.fetch_add(1);
    return store_->extend(ticket, lease);
  }
  bool wakes() const noexcept requires Wakes && requires(const S& s) { s.wakes(); }
  { return store_->wakes(); }
  void await_change(const Ticket& held, std::chrono::milliseconds bound) requires Wakes {
    awaits.fetch_add(1);
    if (spurious.fetch_sub(1) > 0) return;
    store_->await_change(held, bound);
  }

 private:
  S* store_;
};

}  // namespace idem::testing
