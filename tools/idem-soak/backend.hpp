#pragma once
// The store under test, built from the options, and the effects table of transactional mode: a
// business table in the store's own database that handlers write through the claim's
// transaction, so it holds exactly the effects that committed.

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "idem/group_commit_store.hpp"
#include "idem/idem.hpp"
#include "idem/sqlite/store.hpp"
#include "options.hpp"
#ifdef IDEM_SOAK_POSTGRES
#include "idem/postgres/store.hpp"
#endif
#ifdef IDEM_SOAK_REDIS
#include "idem/redis/store.hpp"
#endif

namespace idem::soak {

/// Builds the store `o` names and calls f(store). Throws std::runtime_error when the backend was
/// not compiled in or its URI is unusable.
template <class F>
decltype(auto) with_store(const SoakOptions& o, F&& f) {
  using namespace std::chrono_literals;
  const SqlMode mode = o.mode == Mode::transactional ? SqlMode::transactional : SqlMode::lease;
  switch (o.backend) {
    case Backend::sqlite: {
      SqliteStore store{SqliteStoreOptions{
          .path = o.target, .mode = mode, .table_prefix = o.store_prefix(), .busy_timeout = 10s}};
      if (o.group_commit) {
        GroupCommitStore<SqliteStore> grouped(store);
        return f(grouped);
      }
      return f(store);
    }
    case Backend::postgres: {
#ifdef IDEM_SOAK_POSTGRES
      PostgresStore store{PostgresStoreOptions{.connection = {.uri = o.target,
                                                              .table_prefix = o.store_prefix(),
                                                              .connect_timeout = 2s,
                                                              .statement_timeout = 5s},
                                               .mode = mode,
                                               .pool = {.size = 4, .acquire_timeout = 2s}}};
      if (o.group_commit) {
        // Two groups in flight: the soak covers that mode too (docs/batches.md).
        GroupCommitStore<PostgresStore> grouped(store, GroupCommitOptions{.in_flight = 2});
        return f(grouped);
      }
      return f(store);
#else
      throw std::runtime_error("idem-soak was built without PostgreSQL");
#endif
    }
    case Backend::redis: {
#ifdef IDEM_SOAK_REDIS
      auto conn = redis::ConnectionOptions::from_uri(o.target);
      if (!conn) throw std::runtime_error("bad Redis URI: " + conn.failure().describe());
      redis::ConnectionOptions options = conn.value();
      options.connect_timeout = 500ms;
      options.pool_size = 2;
      auto client = std::make_shared<redis::Client>(options);
      RedisStore store{client, RedisStoreOptions{.prefix = o.store_prefix()}};
      return f(store);
#else
      throw std::runtime_error("idem-soak was built without Redis");
#endif
    }
  }
  throw std::logic_error("unknown backend");
}

/// One row of the effects table.
struct Effect {
  std::string key;
  std::string call;
  std::int64_t fence = 0;
};

/// The effects table (<prefix>effects) beside the store's records; transactional mode only.
struct Effects {
  /// Creates the table; throws on failure.
  static void create(const SoakOptions& o);
  /// Inserts a row through the claim's open transaction; throws idem::Error
  /// (errc::store_unavailable) when the database fails, e.g. while it restarts.
  static void insert(const SoakOptions& o, const Context& ctx, const Effect& e);
  /// Every committed row; throws on failure.
  static std::vector<Effect> read_all(const SoakOptions& o);
};

}  // namespace idem::soak
