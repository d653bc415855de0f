#pragma once
// idem::SqliteBackend: the entity stores (VersionStore, StateMachineStore) on the user's table in a
// SQLite file (compiled library idem::sqlite), over the shared SQL engine (idem/sql/entities.hpp).

#include "idem/engine/entity.hpp"
#include "idem/sql/entities.hpp"
#include "idem/sqlite/store.hpp"

namespace idem {

namespace detail {
// Defined in idem::sqlite. The op log is <connection.table_prefix>entity_ops; connection.mode is
// not used. Throws std::invalid_argument for a bad identifier or option.
SqlEntities open_sqlite_entities(const SqliteStoreOptions& connection, EntityKind kind,
                                 const EntityTable& table);
}  // namespace detail

/// The user's table in a SQLite file (SqliteStoreOptions: path, table_prefix of the op log,
/// busy_timeout, synchronous_full; its mode is not used). The handler runs inside the claim's
/// transaction: idem::sqlite_transaction(ctx).
struct SqliteBackend : detail::SqlEntityBackend<SqliteStoreOptions, &detail::open_sqlite_entities> {
};

}  // namespace idem
