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
  // A transactional fence, from a source no rollback undoes ("{}": the sequence's name).
  const char* next_fence;
  // The schema version this library writes and reads (docs/sql.md#schema). A store that finds an
  // earlier one upgrades it (schema_ddl creates what is missing, then upgrade_version).
  int schema_version;
};

extern const Dialect kSqlite;
extern const Dialect kPostgres;

/// Statement texts for one dialect and table prefix. The prefix was checked to be an identifier.
struct Statements {
  Statements(const Dialect& dialect, const std::string& prefix);

  int version;  // the dialect's schema_version

  std::string records;  // table names
  std::string schema;
  std::string fences;  // PostgreSQL: the sequence transactional claims draw fences from
  std::string create_schema_table;
  std::string create_records_table;
  std::string create_expiry_index;
  std::string insert_version;  // the current version when the table is empty
  std::string select_version;

  // claim: ?1 key, ?2 fp_hi, ?3 fp_lo, ?4 min fence, ?5 lease ms, ?6 retention ms -> fence,
  // took_over; no row: read.
  std::string upsert;
  // read: ?1 key -> state, fp_hi, fp_lo, fence, lease ms left, retention ms left, result.
  std::string read;
  // PostgreSQL: upsert and read in one statement; the first column says acquired (1) or not.
  std::string claim_in_one;
  // Transactional mode: the same, drawing a fence (next_fence); only once the claim holds the key.
  std::string upsert_drawn;
  std::string claim_in_one_drawn;
  // finish: ?1 key, ?2 fence, ?3 state, ?4 result, ?5 ttl ms.
  std::string finish;
  // release: ?1 key, ?2 fence.
  std::string release;
  // extend: ?1 key, ?2 fence, ?3 lease ms.
  std::string extend;
  // purge: ?1 max rows -> the fences removed; raise_floor: ?1 the largest. One transaction.
  std::string purge;
  std::string raise_floor;

  // Steps (idem::StepStore): the table, its DDL, and the names of the triggers that drop a run's
  // steps when its record finishes, goes, or is claimed past its expiry.
  std::string steps;
  std::vector<std::string> create_steps;
  std::vector<std::string> step_triggers;
  // save_step: ?1 key, ?2 index, ?3 name, ?4 result, ?5 fence; only while the fence holds the
  // record (PostgreSQL: under a share lock of its row, so a takeover waits for the step).
  std::string save_step;
  // load_steps: ?1 key, ?2 fence -> (index, name, result) of the steps under the record's
  // fingerprint, by index; one row of NULLs when there are none; no row: lease lost.
  std::string load_steps;
  // holding: ?1 key, ?2 fence -> one row while the fence holds the record.
  std::string holding;
  // find_abandoned: ?1 key prefix, ?2 limit, ?3 prefix length -> (key, kept request: the step
  // at index -1) of live records released or past their lease.
  std::string find_abandoned;

  std::string entity_ops;     // the entity stores' op log
  std::string entity_fences;  // PostgreSQL: the op log's fence sequence
  std::vector<std::string> create_entity_ops;
  // PostgreSQL, waking duplicates (docs/sql.md#waking-a-waiting-duplicate): the channel the
  // wake triggers notify on; the trigger names; count_waiter: ?1 key, ?2 fence -> the wake's
  // payload, counting one more waiter, while that fence holds the record; no row: it does not.
  std::string wake_channel;
  std::vector<std::string> wake_triggers;
  std::string count_waiter;
  std::string upgrade_version;  // raises an earlier version once schema_ddl ran
  // The whole schema, in order, each statement safe to run again (and upgrading an earlier
  // version): what a store runs, `idem schema print` prints and share/idem/schema-*.sql ships.
  std::vector<std::string> schema_ddl;
};

/// True when `prefix` is safe to paste into SQL as part of an identifier.
bool valid_prefix(const std::string& prefix) noexcept;

}  // namespace idem::sql
