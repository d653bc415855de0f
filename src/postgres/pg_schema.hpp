#pragma once
// The PostgreSQL store's schema steps, written once for PostgresStore (PgSession::create_schema)
// and AsyncPostgresStore (async_store.cpp): the probe of what exists, the lock under which
// processes create what is missing, and the DDL in order.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "sql/statements.hpp"

namespace idem::postgres::detail {

/// One row: (records, schema and expiry index all there), transaction_read_only ("on" on a hot
/// standby), (the fence sequence, the steps table and its triggers, the entity op log and its
/// sequence there: a schema of version 1 lacks some of them).
inline std::string schema_probe(const sql::Statements& text) {
  return fmt::format(
      "SELECT to_regclass('{0}') IS NOT NULL AND to_regclass('{1}') IS NOT NULL AND "
      "to_regclass('{1}_expires_at') IS NOT NULL, "
      "current_setting('transaction_read_only'), to_regclass('{2}') IS NOT NULL "
      "AND to_regclass('{3}') IS NOT NULL AND to_regclass('{4}') IS NOT NULL "
      "AND to_regclass('{5}') IS NOT NULL AND (SELECT count(*) FROM pg_trigger "
      "WHERE tgrelid = to_regclass('{1}') AND tgname IN ('{6}')) = {7}",
      text.schema, text.records, text.fences, text.steps, text.entity_ops, text.entity_fences,
      fmt::join(text.step_triggers, "', '"), text.step_triggers.size());
}

/// Taken (pg_advisory_xact_lock) before creating: several processes may start at once; one
/// creates, the others wait and find it done. The entity stores take it too.
inline constexpr const char* kSchemaLock = "SELECT pg_advisory_xact_lock(7302585012475906)";

/// What to run, in one transaction under kSchemaLock, when the probe found something missing or
/// the version is an earlier one: the schema's DDL (Statements::schema_ddl), less the tables
/// and index when `tables` (the probe's first column) says they are there: CREATE INDEX IF NOT
/// EXISTS takes a share lock on the table first, and would wait for every open transactional
/// claim on it.
inline std::vector<std::string> schema_ddl(const sql::Statements& text, bool tables) {
  std::vector<std::string> ddl;
  for (const std::string& statement : text.schema_ddl) {
    const bool table_ddl =
        statement == text.create_schema_table || statement == text.create_records_table ||
        statement == text.create_expiry_index || statement == text.insert_version;
    if (!(tables && table_ddl)) ddl.push_back(statement);
  }
  return ddl;
}

}  // namespace idem::postgres::detail
