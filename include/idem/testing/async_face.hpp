#pragma once
// The asynchronous face of the conformance kit: idem::AsyncGuard::async_execute() over the
// cell's store, each call run to its end for the case. A cell names it in its traits:
//
//   using async_face = idem::testing::AsyncFace<MyStore>;
//
// and either has a store that never blocks (MemoryStore, a CachedStore over one: the face runs
// it as an idem::ImmediateStore on an event loop of its own), or is a BlockingStore<A> over an
// asynchronous store A (idem/testing/blocking_store.hpp: the face's guard calls A), or gives its
// own asynchronous store and the way to run a call on that store's event loop:
//
//   static MyAsyncStore& async_store(MyStore& store);
//   template <class T> static T async_run(MyStore& store, boost::asio::awaitable<T> call);
//
// Link idem::asio (Boost.Asio).

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "idem/asio/async_guard.hpp"
#include "idem/asio/async_store.hpp"
#include "idem/testing/faces.hpp"

namespace idem::testing {

/// The traits give the cell's own asynchronous store (above).
template <class S>
concept TraitsAsyncStore = requires(S& store) {
  StoreTraits<S>::async_store(store);
};

/// The cell is a BlockingStore over its asynchronous store.
template <class S>
concept BlockingOverAsync = requires(S& store) {
  store.async();
};

template <class S>
concept OwnAsyncStore = TraitsAsyncStore<S> || BlockingOverAsync<S>;

namespace faces {

/// The cell's own asynchronous store.
template <OwnAsyncStore S>
auto& own_async_store(S& store) {
  if constexpr (TraitsAsyncStore<S>) {
    return StoreTraits<S>::async_store(store);
  } else {
    return store.async();
  }
}

/// Runs `call` on the event loop of the cell's own asynchronous store, to its end.
template <OwnAsyncStore S, class T>
T run_on(S& store, boost::asio::awaitable<T> call) {
  if constexpr (TraitsAsyncStore<S>) {
    return StoreTraits<S>::async_run(store, std::move(call));
  } else {
    return store.run(std::move(call));
  }
}

/// The asynchronous store the face's guard calls.
template <class S>
struct AsyncStoreOf {
  using type = ImmediateStore<S>;
};
template <OwnAsyncStore S>
struct AsyncStoreOf<S> {
  using type = std::remove_reference_t<decltype(own_async_store(std::declval<S&>()))>;
};

/// Runs `call` to its end on an event loop of its own (ImmediateStore calls complete in place).
template <class T>
T run_here(boost::asio::awaitable<T> call) {
  boost::asio::io_context io;
  // co_spawn needs a default-constructible result; an Outcome is not one.
  auto wrapped = [](boost::asio::awaitable<T> c) -> boost::asio::awaitable<std::optional<T>> {
    co_return co_await std::move(c);
  };
  std::future<std::optional<T>> done =
      boost::asio::co_spawn(io, wrapped(std::move(call)), boost::asio::use_future);
  io.run();
  return std::move(*done.get());
}

}  // namespace faces

/// AsyncGuard::async_execute(); the handler gets no Context (an AsyncContext is not one).
template <class S>
class AsyncFace {
 public:
  using Store = S;
  using GuardStore = typename faces::AsyncStoreOf<S>::type;  // what the guard calls
  static constexpr const char* kName = "AsyncFace";
  static constexpr bool kContext = false;

  AsyncFace(S& store, const FaceSetup& setup)
      : store_(store),
        immediate_(store),
        guard_(guard_store(), faces::options_for(setup, aborted_)) {}

  Outcome<std::string> run(const Key& key, std::string_view payload, const FaceHandler& fn) {
    return faces::catching(aborted_, key, [&] {
      auto call = guard_.async_execute(key, payload, [&]() { return fn(nullptr); });
      if constexpr (OwnAsyncStore<S>) {
        return faces::run_on(store_, std::move(call));
      } else {
        return faces::run_here(std::move(call));
      }
    });
  }
  std::unique_ptr<admin::Admin> admin() { return faces::store_admin(store_); }

 private:
  GuardStore& guard_store() {
    if constexpr (OwnAsyncStore<S>) {
      return faces::own_async_store(store_);
    } else {
      return immediate_;
    }
  }

  faces::AbortedCodes aborted_;  // before the guard, whose observer refers to it
  S& store_;
  ImmediateStore<S> immediate_;  // the guard's store unless the cell has its own
  AsyncGuard<GuardStore> guard_;
};

}  // namespace idem::testing
