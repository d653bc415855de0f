#pragma once
// Backends of the entity stores (VersionStore, StateMachineStore): a tag chooses one.
//
//   idem::MemoryBackend    header-only: entities in process memory, a lock per entity
//   idem::SqliteBackend    link idem::sqlite: the user's table in a SQLite file
//   idem::PostgresBackend  link idem::postgres: the user's table in PostgreSQL

#include "idem/engine/entity.hpp"
#include "idem/memory/entities.hpp"
#include "idem/store_stats.hpp"

// An installed idem has an adapter's headers only if it was built with that adapter, so each SQL
// backend is declared where its adapter's header is present.
#if __has_include("idem/sqlite/store.hpp")
#include "idem/sql/entities.hpp"
#include "idem/sqlite/store.hpp"
#endif
#if __has_include("idem/postgres/store.hpp")
#include "idem/postgres/store.hpp"
#include "idem/sql/entities.hpp"
#endif

namespace idem {

namespace detail {
/// An entity store's figures (VersionStore::stats, StateMachineStore::stats): the SQL backends'
/// own; memory has only its name.
template <class Impl>
StoreStats entity_stats(const Impl& impl) noexcept {
  if constexpr (requires { impl.stats(); }) {
    return impl.stats();
  } else {
    return StoreStats{.store = "memory"};
  }
}
}  // namespace detail

/// Entities in process memory, created with the store's put(). The claim takes the entity's lock
/// (waiting up to the guard's Wait::timeout) and holds it while the handler runs; commit applies
/// the new version or state and records the result, abort leaves the entity as it was.
struct MemoryBackend {
  struct Options {};
  using Impl = detail::MemoryEntities;
  static Impl open(const Options&, detail::EntityKind kind, const EntityTable&) {
    return Impl(kind);
  }
};

#if __has_include("idem/sqlite/store.hpp")
/// The user's table in a SQLite file (SqliteStoreOptions: path, table_prefix of the op log,
/// busy_timeout, synchronous_full; its mode is not used). The handler runs inside the claim's
/// transaction: idem::sqlite_transaction(ctx).
struct SqliteBackend {
  using Options = SqliteStoreOptions;
  using Impl = detail::SqlEntities;
  static Impl open(const Options& options, detail::EntityKind kind, const EntityTable& table) {
    return detail::open_sqlite_entities(options, kind, table);
  }
};
#endif

#if __has_include("idem/postgres/store.hpp")
/// The user's table in PostgreSQL (PostgresStoreOptions: uri, table_prefix of the op log, pool
/// and timeouts; its mode is not used). The handler runs inside the claim's transaction:
/// idem::pg_transaction(ctx).
struct PostgresBackend {
  using Options = PostgresStoreOptions;
  using Impl = detail::SqlEntities;
  static Impl open(const Options& options, detail::EntityKind kind, const EntityTable& table) {
    return detail::open_postgres_entities(options, kind, table);
  }
};
#endif

}  // namespace idem
