#pragma once
// One store type for the proxy's guard whatever the URI opened (SQLite, Redis, Redis Cluster,
// PostgreSQL): the four calls of idem::AsyncStore and the wait of idem::AsyncWakingStore,
// forwarded to the store behind.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "idem/asio/async_store.hpp"
#include "idem/store_stats.hpp"

namespace idem::proxy {

class AnyStore {
 public:
  static constexpr std::string_view kStoreName = "proxy";  // observers' label

  virtual ~AnyStore() = default;
  virtual boost::asio::awaitable<Result<Claim>> async_claim(const ClaimRequest& request) = 0;
  virtual boost::asio::awaitable<Status> async_commit(const Ticket& ticket,
                                                      const Completion& completion) = 0;
  virtual boost::asio::awaitable<Status> async_abort(const Ticket& ticket) = 0;
  virtual boost::asio::awaitable<Status> async_extend(const Ticket& ticket,
                                                      std::chrono::milliseconds lease) = 0;
  /// Whether waiting duplicates are woken by the holder's end (else the guard polls).
  virtual bool wakes() const = 0;
  virtual boost::asio::awaitable<bool> async_await_change(const Ticket& held,
                                                          std::chrono::milliseconds bound) = 0;
  /// The backend, for messages: "sqlite", "redis", "postgres".
  virtual std::string_view backend() const noexcept = 0;
  /// The store's figures for /metrics (the replay cache's, when there is one).
  virtual StoreStats stats() const = 0;
};

/// An AnyStore over a store S that it owns.
template <AsyncStore S>
class StoreOf final : public AnyStore {
 public:
  template <class... Args>
  explicit StoreOf(Args&&... args) : store_(std::forward<Args>(args)...) {}

  boost::asio::awaitable<Result<Claim>> async_claim(const ClaimRequest& request) override {
    return store_.async_claim(request);
  }
  boost::asio::awaitable<Status> async_commit(const Ticket& ticket,
                                              const Completion& completion) override {
    return store_.async_commit(ticket, completion);
  }
  boost::asio::awaitable<Status> async_abort(const Ticket& ticket) override {
    return store_.async_abort(ticket);
  }
  boost::asio::awaitable<Status> async_extend(const Ticket& ticket,
                                              std::chrono::milliseconds lease) override {
    return store_.async_extend(ticket, lease);
  }
  bool wakes() const override {
    if constexpr (AsyncWakingStore<S>) {
      return store_.wakes();
    } else {
      return false;
    }
  }
  boost::asio::awaitable<bool> async_await_change(const Ticket& held,
                                                  std::chrono::milliseconds bound) override {
    if constexpr (AsyncWakingStore<S>) {
      return store_.async_await_change(held, bound);
    } else {
      return not_woken();
    }
  }
  std::string_view backend() const noexcept override { return S::kStoreName; }
  StoreStats stats() const override {
    StoreStats s = stats_of(store_);
    if (s.store.empty()) s.store = S::kStoreName;
    return s;
  }

 private:
  static boost::asio::awaitable<bool> not_woken() { co_return false; }
  S store_;
};

static_assert(AsyncWakingStore<AnyStore>);

}  // namespace idem::proxy
