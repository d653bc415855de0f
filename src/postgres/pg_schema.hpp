#pragma once
// The PostgreSQL store's schema steps, written once for PostgresStore (PgSession::create_schema)
// and AsyncPostgresStore (src/asio): the probe of what exists, the lock under which processes
// create what is missing, and the DDL in order.

#include <fmt/format.h>

#include <string>
#include <vector>

#include "sql/statements.hpp"

namespace idem::pg {

/// One row: (records, schema and expiry index all there), transaction_read_only ("on" on a hot
/// standby), (the fence sequence and the steps table there).
inline std::string schema_probe(const sql::Statements& text) {
  return fmt::format(
      "SELECT to_regclass('{0}') IS NOT NULL AND to_regclass('{1}') IS NOT NULL AND "
      "to_regclass('{1}_expires_at') IS NOT NULL, "
      "current_setting('transaction_read_only'), to_regclass('{2}') IS NOT NULL "
      "AND to_regclass('{3}') IS NOT NULL",
      text.schema, text.records, text.fences, text.steps);
}

/// Taken (pg_advisory_xact_lock) before creating: several processes may start at once; one
/// creates, the others wait and find it done.
inline constexpr const char* kSchemaLock = "SELECT pg_advisory_xact_lock(7302585012475906)";

/// What to run, in one transaction under kSchemaLock, when the probe found something missing;
/// `tables`: the probe's first column.
inline std::vector<std::string> schema_ddl(const sql::Statements& text, bool tables) {
  std::vector<std::string> ddl;
  if (!tables) {
    ddl.push_back(text.create_schema_table);
    ddl.push_back(text.create_records_table);
    ddl.push_back(text.create_expiry_index);
  }
  // Transactional fences (tables of an earlier release lack it); CACHE 1, the default:
  // nextval() hands values out in call order.
  ddl.push_back("CREATE SEQUENCE IF NOT EXISTS " + text.fences + " AS bigint CACHE 1");
  // Steps (tables of an earlier release lack them): the table and its triggers.
  for (const std::string& s : text.create_steps) ddl.push_back(s);
  if (!tables) ddl.push_back(text.insert_version);
  return ddl;
}

}  // namespace idem::pg
