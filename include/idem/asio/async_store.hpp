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

/// An AsyncStore that can wake a coroutine waiting for another holder (the Wait policy) instead
/// of letting it poll: the asynchronous idem::WakingStore. wakes() says whether this store object
/// waits at all (a store may be unable to: then the guard polls). async_await_change(held,
/// bound) completes once the hold `held` has ended or been taken over, once `bound` has passed,
/// or early (spuriously), with true; or at once with false when it could not wait (every waiter
/// busy): the caller then pauses on its own. It never takes longer than `bound` plus the
/// backend's own call deadline, reports nothing, and ends promptly, with true, when the calling
/// coroutine is cancelled. The store copies what it keeps of `held`: a cancelled wait ends
/// before the store's side of it does.
template <class S>
concept AsyncWakingStore = AsyncStore<S> &&
    requires(S& store, const S& cstore, const Ticket& held, std::chrono::milliseconds bound) {
  { cstore.wakes() } -> std::same_as<bool>;
  { store.async_await_change(held, bound) } -> std::same_as<boost::asio::awaitable<bool>>;
};

/// An idem::Store whose calls never block (MemoryStore, a CachedStore over one), as an
/// AsyncStore: each call runs in place. Over a blocking store it would stall the event loop for
/// every round trip. Not an AsyncWakingStore: a wait would block the loop, so duplicates poll
/// (ThreadedAsyncStore wakes them). Holds a reference to the store.
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
