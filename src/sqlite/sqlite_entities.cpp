// The entity stores (VersionStore, StateMachineStore) on SQLite.

#include "idem/sqlite/entities.hpp"
#include "sql/entity_engine.hpp"

namespace idem::detail {

SqlEntities open_sqlite_entities(const SqliteStoreOptions& connection, EntityKind kind,
                                 const EntityTable& table) {
  return sql::make_entities(sql::make_sqlite_backend(connection), sql::kSqlite, kind, table,
                            connection.table_prefix);
}

}  // namespace idem::detail
