#pragma once
// The statements of the SQL record strategy, written once. A Dialect fills in what SQLite and
// PostgreSQL spell differently: parameter markers, column types, the clock, max().

#include <string>
#include <vector>

namespace idem::sql {

/// The few things SQLite and PostgreSQL spell differently.
struct Dialect {
  const char* name;          // "sqlite" or "postgres", for messages
  char param;                // parameter marker: '?' gives ?1, '$' gives $1
  const char* blob;          // binary column type
  const char* int64;         // 64-bit integer column type
  const char* int16;         // small integer column type
  const char* now_ms;        // the database clock in ms since the epoch, fixed within a statement
  const char* greatest;      // max of two values
  const char* table_suffix;  // after CREATE TABLE (...)
  // A transactional fence, drawn from a source no rollback undoes: "{}" is the sequence name.
  // SQLite: a function of the store's connection (src/sqlite/fence_file.hpp); PostgreSQL: a
  // sequence.
  const char* next_fence;
};

extern const Dialect kSqlite;
extern const Dialect kPostgres;

/// The schema version this library writes and reads. 1: the schema and records tables and the
/// expiry index (PostgreSQL: and the fence sequence). 2: and the steps table with its triggers,
/// and the entity stores' op log (PostgreSQL: and its fence sequence). A store that finds 1
/// upgrades it (Statements::schema_ddl creates what is missing, then upgrade_version).
inline constexpr int kSchemaVersion = 2;

/// Statement texts for one dialect and table prefix. The prefix was checked to be an identifier.
struct Statements {
  Statements(const Dialect& dialect, const std::string& prefix);

  std::string records;  // table names
  std::string schema;
  std::string fences;  // PostgreSQL: the sequence transactional claims draw fences from
  std::string create_schema_table;
  std::string create_records_table;
  std::string create_expiry_index;
  std::string insert_version;  // the current version when the table is empty
  std::string select_version;

  // claim: ?1 key, ?2 fp_hi, ?3 fp_lo, ?4 min fence, ?5 lease ms, ?6 retention ms.
  // Inserts, or takes over a released/expired record, or an in-progress one whose lease ran out
  // and whose fingerprint matches; RETURNING fence, took_over. Nothing returned: read.
  std::string upsert;
  // read: ?1 key -> state, fp_hi, fp_lo, fence, lease ms left, retention ms left, result.
  std::string read;
  // PostgreSQL: upsert and read in one statement; the first column says acquired (1) or not.
  std::string claim_in_one;
  // Transactional mode: the same, with a new fence drawn (Dialect::next_fence) as a third term
  // of the new row's max(). Run only once the claim holds the key (Session::claim).
  std::string upsert_drawn;
  std::string claim_in_one_drawn;
  // finish: ?1 key, ?2 fence, ?3 state, ?4 result, ?5 ttl ms.
  std::string finish;
  // release: ?1 key, ?2 fence.
  std::string release;
  // extend: ?1 key, ?2 fence, ?3 lease ms.
  std::string extend;
  // purge: ?1 max rows; RETURNING the fences removed. raise_floor: ?1 the largest of them. Both
  // in one transaction.
  std::string purge;
  std::string raise_floor;

  // Steps (idem::StepStore): a table beside the records and triggers that drop a record's steps
  // when it completes, fails or is deleted. The DDL, in order; each statement is safe to run
  // again.
  std::string steps;  // the table's name
  std::vector<std::string> create_steps;
  // The triggers on the records table that drop a run's steps: when the record finishes, goes,
  // or is claimed past its expiry (the names the schema checks look for).
  std::vector<std::string> step_triggers;
  // save_step: ?1 key, ?2 index, ?3 name, ?4 result, ?5 fence. Copies the record's fingerprint
  // onto the step, only while the fence holds the record (PostgreSQL: under a share lock of its
  // row, so a takeover waits for the step and then sees it); no row inserted: lease lost.
  std::string save_step;
  // load_steps: ?1 key, ?2 fence -> (index, name, result) of the steps under the record's
  // fingerprint, by index; one row of NULLs when there are none; no row: lease lost.
  std::string load_steps;
  // holding: ?1 key, ?2 fence -> one row while the fence holds the record. An atomic step's
  // first statement (on PostgreSQL it also sends the step's BEGIN).
  std::string holding;
  // The run's kept request is the step at index -1 (name empty), written by save_step.
  // find_abandoned: ?1 key prefix, ?2 limit, ?3 prefix length -> (key, request) of records in
  // progress past their lease or released, not expired, with a request of their fingerprint.
  std::string find_abandoned;

  // The entity stores' op log (src/sql/entity_engine.cpp) and, on PostgreSQL, the sequence its
  // fences are drawn from.
  std::string entity_ops;     // the op log's name
  std::string entity_fences;  // PostgreSQL: the op log's fence sequence
  std::vector<std::string> create_entity_ops;
  // The version of a schema of an earlier version, once schema_ddl made it current.
  std::string upgrade_version;
  // The whole schema of this version, in order, each statement safe to run again: what a store
  // runs when something is missing, `idem schema print` prints and share/idem/schema-*.sql
  // ships. Run on a database of an earlier version, it upgrades it.
  std::vector<std::string> schema_ddl;
};

/// True when `prefix` is safe to paste into SQL as part of an identifier.
bool valid_prefix(const std::string& prefix) noexcept;

}  // namespace idem::sql
