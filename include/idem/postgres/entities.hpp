#pragma once
// idem::PostgresBackend: the entity stores (VersionStore, StateMachineStore) on the user's table in
// PostgreSQL (compiled library idem::postgres), over the shared SQL engine
// (idem/sql/entities.hpp).

#include "idem/engine/entity.hpp"
#include "idem/postgres/store.hpp"
#include "idem/sql/entities.hpp"

namespace idem {

namespace detail {
// Defined in idem::postgres. The op log is <options.connection.table_prefix>entity_ops;
// options.mode is not used. Throws std::invalid_argument for a bad identifier or option.
SqlEntities open_postgres_entities(const PostgresStoreOptions& options, EntityKind kind,
                                   const EntityTable& table);
}  // namespace detail

/// The user's table in PostgreSQL (PostgresStoreOptions: the connection, whose table_prefix
/// names the op log, and the pool; its mode is not used). The handler runs inside the claim's
/// transaction: idem::pg_transaction(ctx).
struct PostgresBackend
    : detail::SqlEntityBackend<PostgresStoreOptions, &detail::open_postgres_entities> {};

}  // namespace idem
