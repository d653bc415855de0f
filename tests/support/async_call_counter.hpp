#pragma once
// AsyncCallCounter<S>: an asynchronous store over another (held by reference) that counts its
// calls, so a test can tell how many store calls an asynchronous waiting duplicate cost
// (CallCounter's twin for idem::AsyncStore). With Wakes = false it hides async_await_change: the
// guard then polls, as over a store that cannot wake.

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <chrono>

#include "idem/asio/async_store.hpp"
#include "idem/store.hpp"

namespace idem::testing {

template <class S, bool Wakes = true>
class AsyncCallCounter {
 public:
  static constexpr std::string_view kStoreName = S::kStoreName;

  explicit AsyncCallCounter(S& store) noexcept : store_(&store) {}

  std::atomic<int> claims{0};
  std::atomic<int> claims_after_wait{0};  // of them, claims saying ClaimRequest::after_wait
  std::atomic<int> commits{0};
  std::atomic<int> aborts{0};
  std::atomic<int> extends{0};
  std::atomic<int> awaits{0};  // async_await_change calls begun

  int calls() const noexcept {
    return claims.load() + commits.load() + aborts.load() + extends.load() + awaits.load();
  }

  boost::asio::awaitable<Result<Claim>> async_claim(const ClaimRequest& request) {
    claims.fetch_add(1);
    if (request.after_wait) claims_after_wait.fetch_add(1);
    return store_->async_claim(request);
  }
  boost::asio::awaitable<Status> async_commit(const Ticket& ticket, const Completion& completion) {
    commits.fetch_add(1);
    return store_->async_commit(ticket, completion);
  }
  boost::asio::awaitable<Status> async_abort(const Ticket& ticket) {
    aborts.fetch_add(1);
    return store_->async_abort(ticket);
  }
  boost::asio::awaitable<Status> async_extend(const Ticket& ticket,
                                              std::chrono::milliseconds lease) {
    extends.fetch_add(1);
    return store_->async_extend(ticket, lease);
  }
  bool wakes() const noexcept requires Wakes { return store_->wakes(); }
  boost::asio::awaitable<bool> async_await_change(const Ticket& held,
                                                  std::chrono::milliseconds bound) requires Wakes {
    awaits.fetch_add(1);
    return store_->async_await_change(held, bound);
  }

 private:
  S* store_;
};

}  // namespace idem::testing
