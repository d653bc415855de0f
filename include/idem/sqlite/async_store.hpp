#pragma once
// idem::sqlite::AsyncStore: SqliteStore's records as an idem::AsyncStore, each call run on a
// thread of the store's own (idem::ThreadedAsyncStore). Header-only; link idem::asio_sqlite.

#include <stdexcept>
#include <utility>

#include "idem/asio/threaded_store.hpp"
#include "idem/sqlite/store.hpp"

namespace idem::sqlite {

/// A SqliteStore in lease mode behind one thread, whose statements run there in arrival order;
/// each caller resumes on its own executor. The same file and records as a SqliteStore with the
/// same options; store() is that SqliteStore, for a blocking guard in the same process. A call
/// waits at most queue_timeout for the thread (default: busy_timeout), then is answered
/// store_unavailable without running. Destroying the store finishes the running call and answers
/// the queued ones store_unavailable. Transactional mode is refused (docs/async.md).
class AsyncStore : public ThreadedAsyncStore<SqliteStore> {
 public:
  /// Throws std::invalid_argument for SqlMode::transactional, and for what SqliteStore refuses.
  explicit AsyncStore(const SqliteStoreOptions& options)
      : AsyncStore(options, ThreadedStoreOptions{.queue_timeout = options.busy_timeout}) {}
  AsyncStore(const SqliteStoreOptions& options, ThreadedStoreOptions threading)
      : ThreadedAsyncStore(threading, lease_only(options)) {}

 private:
  static const SqliteStoreOptions& lease_only(const SqliteStoreOptions& options) {
    if (options.mode != SqlMode::lease) {
      throw std::invalid_argument(
          "idem: sqlite::AsyncStore runs in SqlMode::lease only: a transactional claim would "
          "hold the store's one thread and connection for the handler's whole run "
          "(docs/async.md)");
    }
    return options;
  }
};

}  // namespace idem::sqlite

static_assert(idem::AsyncStore<idem::sqlite::AsyncStore>);
