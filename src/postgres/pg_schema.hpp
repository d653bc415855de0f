#pragma once
// The PostgreSQL stores' schema steps: the probe, the creators' lock, the DDL in order.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "sql/statements.hpp"

namespace idem::postgres::detail {

/// One row: the version 1 tables there, transaction_read_only ("on" on a hot standby), the rest
/// of the schema there.
inline std::string schema_probe(const sql::Statements& text) {
  return fmt::format(
      "SELECT to_regclass('{0}') IS NOT NULL AND to_regclass('{1}') IS NOT NULL AND "
      "to_regclass('{1}_expires_at') IS NOT NULL, "
      "current_setting('transaction_read_only'), to_regclass('{2}') IS NOT NULL "
      "AND to_regclass('{3}') IS NOT NULL AND to_regclass('{4}') IS NOT NULL "
      "AND to_regclass('{5}') IS NOT NULL AND (SELECT count(*) FROM pg_trigger "
      "WHERE tgrelid = to_regclass('{1}') AND tgname IN ('{6}', '{8}')) = {7} + {9} "
      "AND (SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass('{1}') "
      "AND attname = 'waiters' AND NOT attisdropped) = 1",
      text.schema, text.records, text.fences, text.steps, text.entity_ops, text.entity_fences,
      fmt::join(text.step_triggers, "', '"), text.step_triggers.size(),
      fmt::join(text.wake_triggers, "', '"), text.wake_triggers.size());
}

/// Taken before creating: of processes starting at once, one creates, the others find it done.
inline constexpr const char* kSchemaLock = "SELECT pg_advisory_xact_lock(7302585012475906)";

/// The DDL to run under kSchemaLock, less the tables and index when `tables` are there: CREATE
/// INDEX IF NOT EXISTS would wait (share lock) for every open transactional claim on the table.
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
