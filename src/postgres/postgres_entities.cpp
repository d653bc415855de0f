// The entity stores (VersionStore, StateMachineStore) on PostgreSQL.

#include "idem/postgres/entities.hpp"
#include "sql/entity_engine.hpp"

namespace idem::detail {

SqlEntities open_postgres_entities(const PostgresStoreOptions& options, EntityKind kind,
                                   const EntityTable& table) {
  return sql::make_entities(sql::make_postgres_backend(options), sql::kPostgres, kind, table,
                            options.connection.table_prefix);
}

}  // namespace idem::detail
