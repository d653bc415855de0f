#pragma once
// idem's conformance kit for asynchronous stores: every case of the record-store kit
// (record_store_conformance.hpp) through the asynchronous calls, each run to its end by a
// BlockingStore (blocking_store.hpp), and the asynchronous guard's face (async_face.hpp). An
// asynchronous store written for another database runs the same cases as idem's own (the async
// Redis, Redis Cluster and PostgreSQL stores). Describe the cell, a store and the options that
// make it, in a struct of your own:
//
//   #include <idem/testing/async_store_conformance.hpp>
//
//   struct MyAsyncCell {
//     using Store = MyAsyncStore;                 // constructed as Store(executor, options)
//     static constexpr std::chrono::milliseconds lease{500};  // long enough for one step
//     static std::optional<MyAsyncStoreOptions> options();   // fresh records each call
//     // Optional: the store's admin over the records those options reach.
//     static std::unique_ptr<idem::admin::Admin> admin(const MyAsyncStoreOptions&);
//   };
//
//   IDEM_ASYNC_STORE_CONFORMANCE(MyAsync, MyAsyncCell);  // MyAsync/RecordStoreConformance.*, ...
//
// options() runs before every case; for a server that is not configured it may skip the case
// (GTEST_SKIP() inside a lambda) or fail it, and return nullopt. The same options again open
// the same records (the reopen cases); the store's time is the server's (advance() sleeps).
// Link idem::testing and idem::asio.

#include <chrono>
#include <concepts>
#include <memory>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>

#include "idem/admin.hpp"
#include "idem/asio/async_store.hpp"
#include "idem/testing/async_face.hpp"
#include "idem/testing/blocking_store.hpp"
#include "idem/testing/record_store_conformance.hpp"
#include "idem/testing/store_traits.hpp"

namespace idem::testing {

/// A cell of the asynchronous kit (above).
template <class Cell>
concept AsyncCell = requires {
  typename decltype(Cell::options())::value_type;
  { Cell::lease } -> std::convertible_to<std::chrono::milliseconds>;
}
&&AsyncStore<typename Cell::Store>;

/// The cell's options type.
template <class Cell>
using CellOptions = typename decltype(Cell::options())::value_type;

/// The cell's store behind BlockingStore, with the options it was made from (for reopen()).
template <AsyncCell Cell>
class BlockingCell : public BlockingStore<typename Cell::Store> {
 public:
  explicit BlockingCell(CellOptions<Cell> options)
      : BlockingStore<typename Cell::Store>(options), options_(std::move(options)) {}
  const CellOptions<Cell>& options() const noexcept { return options_; }

 private:
  CellOptions<Cell> options_;
};

template <AsyncCell Cell>
struct StoreTraits<BlockingCell<Cell>> {
  using S = BlockingCell<Cell>;
  static constexpr std::chrono::milliseconds lease = Cell::lease;

  static std::unique_ptr<S> make() {
    std::optional<CellOptions<Cell>> options = Cell::options();
    return options ? std::make_unique<S>(std::move(*options)) : nullptr;
  }
  // A cell whose store cannot wait says `static constexpr bool waits = false;` (wake_cases.hpp).
  static constexpr bool waits = [] {
    if constexpr (requires { Cell::waits; }) {
      return Cell::waits;
    } else {
      return true;
    }
  }();
  static constexpr bool takeover_wakes = [] {
    if constexpr (requires { Cell::takeover_wakes; }) {
      return Cell::takeover_wakes;
    } else {
      return true;
    }
  }();
  static std::unique_ptr<S> reopen(S& store) { return std::make_unique<S>(store.options()); }
  static void advance(S&, std::chrono::milliseconds d) { std::this_thread::sleep_for(d); }
  static std::unique_ptr<admin::Admin> admin(S& store) requires
      requires(const CellOptions<Cell>& o) {
    Cell::admin(o);
  }
  { return Cell::admin(store.options()); }
  using async_face = AsyncFace<S>;  // NOLINT(readability-identifier-naming): the traits' name
};

}  // namespace idem::testing

/// Runs the record-store kit and the asynchronous face on the cell given after `Prefix` (an
/// identifier naming it in test names). At namespace scope, once per cell.
#define IDEM_ASYNC_STORE_CONFORMANCE(Prefix, ...) \
  IDEM_RECORD_STORE_CONFORMANCE(Prefix, ::idem::testing::BlockingCell<__VA_ARGS__>)
