#pragma once
// The AsyncStore concept: what AsyncGuard needs from a store whose calls suspend instead of
// blocking; and ImmediateStore, which runs a non-blocking idem::Store's calls in place.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <concepts>
#include <string_view>

#include "idem/engine/call_timer.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem {

/// A record store with the four calls of idem::Store, each an awaitable on Asio: the same atomic
/// steps and answers. The request, ticket and completion must live until the awaitable completes.
/// A call in flight is not cancelled with its coroutine: it completes (within the store's own
/// timeouts), so that the guard always learns what a claim or commit did.
template <class S>
concept AsyncStore = requires(S& store, const ClaimRequest& request, const Ticket& ticket,
                              const Completion& completion, std::chrono::milliseconds lease) {
  { store.async_claim(request) } -> std::same_as<boost::asio::awaitable<Result<Claim>>>;
  { store.async_commit(ticket, completion) } -> std::same_as<boost::asio::awaitable<Status>>;
  { store.async_abort(ticket) } -> std::same_as<boost::asio::awaitable<Status>>;
  { store.async_extend(ticket, lease) } -> std::same_as<boost::asio::awaitable<Status>>;
};

/// An idem::Store whose calls never block (MemoryStore, a CachedStore over one), as an
/// AsyncStore: each call runs in place. Over a blocking store it would stall the event loop for
/// every round trip. Holds a reference to the store.
template <Store S>
class ImmediateStore {
 public:
  static constexpr std::string_view kStoreName = detail::store_name_of<S>();  // observers' label

  explicit ImmediateStore(S& store) noexcept : store_(&store) {}

  boost::asio::awaitable<Result<Claim>> async_claim(const ClaimRequest& request) {
    co_return store_->claim(request);
  }
  boost::asio::awaitable<Status> async_commit(const Ticket& ticket, const Completion& completion) {
    co_return store_->commit(ticket, completion);
  }
  boost::asio::awaitable<Status> async_abort(const Ticket& ticket) {
    co_return store_->abort(ticket);
  }
  boost::asio::awaitable<Status> async_extend(const Ticket& ticket,
                                              std::chrono::milliseconds lease) {
    co_return store_->extend(ticket, lease);
  }

  S& store() noexcept { return *store_; }

 private:
  S* store_;
};

}  // namespace idem
