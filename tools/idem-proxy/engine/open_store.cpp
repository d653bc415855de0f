#include "open_store.hpp"

#include <exception>
#include <string_view>
#include <utility>

#include "idem/asio/cached_store.hpp"
#include "idem/error.hpp"
#include "idem/sqlite/async_store.hpp"
#ifdef IDEM_PROXY_WITH_REDIS
#include "idem/redis/async_store.hpp"
#endif
#ifdef IDEM_PROXY_WITH_POSTGRES
#include "idem/postgres/async_store.hpp"
#endif

namespace idem::proxy {

namespace {

// The store S built from `args`, behind this instance's replay cache when the config keeps one.
template <class S, class... Args>
std::unique_ptr<AnyStore> store_of(const StoreConfig& config, Args&&... args) {
  if (config.cache_entries == 0) return std::make_unique<StoreOf<S>>(std::forward<Args>(args)...);
  CachedStoreOptions cache;
  cache.max_entries = config.cache_entries;
  cache.max_ttl = config.cache_ttl;
  return std::make_unique<StoreOf<AsyncCachedStore<S>>>(cache, std::forward<Args>(args)...);
}

std::unique_ptr<AnyStore> open_sqlite(const StoreConfig& config, std::string_view path,
                                      std::string& error) {
  if (path.starts_with("//")) path.remove_prefix(2);  // sqlite:///abs/path
  if (path.empty()) {
    error = "the sqlite URI names no file (sqlite:PATH or sqlite:///abs/path)";
    return nullptr;
  }
  SqliteStoreOptions options;
  options.path = std::string(path);
  return store_of<sqlite::AsyncStore>(config, options);
}

#ifdef IDEM_PROXY_WITH_REDIS
std::unique_ptr<AnyStore> open_redis(const StoreConfig& config, std::string_view uri, bool cluster,
                                     const boost::asio::any_io_executor& executor,
                                     std::string& error) {
  AsyncRedisStoreOptions options;
  if (cluster) {
    Result<redis::ClusterOptions> parsed = redis::ClusterOptions::from_uri(uri);
    if (!parsed) {
      error = parsed.failure().describe();
      return nullptr;
    }
    options.connection = parsed->node;
    options.cluster_seeds = parsed->seeds;
    options.max_attempts = parsed->max_attempts;
  } else {
    Result<redis::ConnectionOptions> parsed = redis::ConnectionOptions::from_uri(uri);
    if (!parsed) {
      error = parsed.failure().describe();
      return nullptr;
    }
    options.connection = std::move(parsed).value();
  }
  return store_of<AsyncRedisStore>(config, executor, std::move(options));
}
#endif

#ifdef IDEM_PROXY_WITH_POSTGRES
std::unique_ptr<AnyStore> open_postgres(const StoreConfig& config, std::string_view uri,
                                        const boost::asio::any_io_executor& executor) {
  AsyncPostgresStoreOptions options;
  options.connection.uri = std::string(uri);
  return store_of<AsyncPostgresStore>(config, executor, std::move(options));
}
#endif

}  // namespace

std::unique_ptr<AnyStore> open_store(const StoreConfig& config,
                                     const boost::asio::any_io_executor& executor,
                                     std::string& error) {
  const std::string_view uri = config.uri;
  try {
    if (uri.starts_with("sqlite:")) return open_sqlite(config, uri.substr(7), error);
#ifdef IDEM_PROXY_WITH_REDIS
    if (uri.starts_with("redis+cluster://") || uri.starts_with("rediss+cluster://")) {
      return open_redis(config, uri, true, executor, error);
    }
    if (uri.starts_with("redis://") || uri.starts_with("rediss://") || uri.starts_with("unix://")) {
      return open_redis(config, uri, false, executor, error);
    }
#endif
#ifdef IDEM_PROXY_WITH_POSTGRES
    if (uri.starts_with("postgresql://") || uri.starts_with("postgres://")) {
      return open_postgres(config, uri, executor);
    }
#endif
  } catch (const std::exception& e) {
    error = e.what();
    return nullptr;
  }
  // The scheme alone: the rest of an unknown URI may hold a password.
  const std::string_view scheme = uri.substr(0, uri.find(':'));
  error = "unknown store URI scheme '" + std::string(scheme) +
          ":': this idem-proxy opens sqlite:PATH"
#ifdef IDEM_PROXY_WITH_REDIS
          ", redis://, rediss://, unix://, redis+cluster://, rediss+cluster://"
#endif
#ifdef IDEM_PROXY_WITH_POSTGRES
          ", postgresql://, postgres://"
#endif
      ;
  return nullptr;
}

boost::asio::awaitable<std::string> probe_store(AnyStore& store) {
  // Fence 0 is never a holder's (fences start at 1): the extend changes nothing, and a store
  // that answers at all answers lease_lost.
  const Status s =
      co_await store.async_extend(Ticket{"idem-proxy:health", 0}, std::chrono::milliseconds{1});
  if (s.error() != make_error_code(errc::store_unavailable) &&
      s.error() != make_error_code(errc::outcome_unknown)) {
    co_return std::string{};
  }
  co_return s.failure().describe();
}

}  // namespace idem::proxy
