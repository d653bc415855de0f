#pragma once
// The proxy's record store, from store.uri: sqlite:PATH (sqlite:///abs/path), redis:// and
// rediss:// (one server), redis+cluster:// and rediss+cluster:// (a Redis Cluster),
// postgresql:// and postgres:// (PostgreSQL). Each is the asynchronous store of its backend in
// lease mode (docs/async.md).

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <memory>
#include <string>

#include "any_store.hpp"
#include "proxy_config.hpp"

namespace idem::proxy {

/// The store `config.uri` names, on `executor` (Redis, PostgreSQL); nullptr with `error` set
/// when the URI is unusable or names a backend this build lacks. Connects lazily.
std::unique_ptr<AnyStore> open_store(const StoreConfig& config,
                                     const boost::asio::any_io_executor& executor,
                                     std::string& error);

/// Whether the store answers: a call that writes nothing (an extend no holder can match).
/// Empty when it does, else why not.
boost::asio::awaitable<std::string> probe_store(AnyStore& store);

}  // namespace idem::proxy
