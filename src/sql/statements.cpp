#include "sql/statements.hpp"

#include <fmt/format.h>

#include "idem/engine/record_model.hpp"

namespace idem::sql {

const Dialect kSqlite{
    .name = "sqlite",
    .param = '?',
    .blob = "BLOB",
    .int64 = "INTEGER",
    .int16 = "INTEGER",
    // julianday('now') is fixed for the whole statement; ms since the Unix epoch.
    .now_ms = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
    .greatest = "max",
    .table_suffix = " WITHOUT ROWID",
    .next_fence = "idem_next_fence()",
    .schema_version = 2,
};

const Dialect kPostgres{
    .name = "postgres",
    .param = '$',
    .blob = "bytea",
    .int64 = "bigint",
    .int16 = "smallint",
    // statement_timestamp() is fixed for the whole statement, unlike clock_timestamp(), and
    // unlike now() it moves on inside a transaction.
    .now_ms = "CAST(extract(epoch FROM statement_timestamp()) * 1000 AS bigint)",
    .greatest = "GREATEST",
    .table_suffix = "",
    .next_fence = "nextval('{}')",
    // 3: the records' waiters column and the wake triggers (waking a waiting duplicate).
    .schema_version = 3,
};

bool valid_prefix(const std::string& prefix) noexcept {
  if (prefix.size() > 40) return false;  // PostgreSQL identifiers stop at 63 bytes
  for (char c : prefix) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return prefix.empty() || !(prefix[0] >= '0' && prefix[0] <= '9');
}

namespace {

// The record model's claim rules (detail::classify) as one upsert. A takeover is a compare-and-set
// on the row the statement locked: the WHERE sees its latest committed version.
constexpr const char* kUpsertInto =
    "INSERT INTO {rec} AS r (key, state, fp_hi, fp_lo, fence, took_over, lease_until, "
    "expires_at, result) ";
constexpr const char* kUpsertValues =
    "VALUES ({p1}, {held}, {p2}, {p3}, "
    "{greatest}({p4}, {drawn}(SELECT max(fence_floor) FROM {sch}) + 1), 0, "
    "{now} + {p5}, {now} + {p6}, NULL) ";
// PostgreSQL: the same row, only when the CTE `settled` found no finished record (typed here: a
// SELECT list does not take its types from the columns it fills, as VALUES does).
constexpr const char* kUpsertUnlessSettled =
    "SELECT CAST({p1} AS {blob}), {held}, CAST({p2} AS {i64}), CAST({p3} AS {i64}), "
    "{greatest}(CAST({p4} AS {i64}), {drawn}(SELECT max(fence_floor) FROM {sch}) + 1), 0, "
    "{now} + CAST({p5} AS {i64}), {now} + CAST({p6} AS {i64}), NULL "
    "WHERE NOT EXISTS (SELECT 1 FROM settled) ";
constexpr const char* kUpsertOnConflict =
    "ON CONFLICT (key) DO UPDATE SET state = {held}, fp_hi = excluded.fp_hi, "
    "fp_lo = excluded.fp_lo, fence = {greatest}(r.fence + 1, excluded.fence), "
    "took_over = CASE WHEN r.state = {held} AND r.expires_at > {now} THEN 1 ELSE 0 END, "
    "lease_until = excluded.lease_until, expires_at = excluded.expires_at, result = NULL "
    "WHERE r.state = {released} OR r.expires_at <= {now} OR (r.state = {held} "
    "AND r.lease_until <= {now} AND r.fp_hi = excluded.fp_hi AND r.fp_lo = excluded.fp_lo) "
    "RETURNING fence, took_over";

constexpr const char* kReadColumns =
    "state, fp_hi, fp_lo, fence, lease_until - {now}, expires_at - {now}, result";

}  // namespace

Statements::Statements(const Dialect& d, const std::string& prefix)
    : version(d.schema_version),
      records(prefix + "records"),
      schema(prefix + "schema"),
      fences(prefix + "fences") {
  auto p = [&](int i) { return fmt::format("{}{}", d.param, i); };
  const bool postgres = d.param == '$';
  const std::string finished =
      fmt::format("{}, {}", int(detail::SqlState::completed), int(detail::SqlState::failed));
  auto fill = [&](const char* text, const std::string& drawn = "") {
    return fmt::format(
        fmt::runtime(text), fmt::arg("rec", records), fmt::arg("sch", schema),
        fmt::arg("drawn", drawn), fmt::arg("now", d.now_ms), fmt::arg("greatest", d.greatest),
        fmt::arg("blob", d.blob), fmt::arg("i64", d.int64), fmt::arg("i16", d.int16),
        fmt::arg("suffix", d.table_suffix), fmt::arg("p1", p(1)), fmt::arg("p2", p(2)),
        fmt::arg("p3", p(3)), fmt::arg("p4", p(4)), fmt::arg("p5", p(5)), fmt::arg("p6", p(6)),
        fmt::arg("version", d.schema_version),
        fmt::arg("held", static_cast<int>(detail::SqlState::held)),
        fmt::arg("released", static_cast<int>(detail::SqlState::released)),
        fmt::arg("steps", steps), fmt::arg("finished", finished),
        fmt::arg("lock", postgres ? " FOR SHARE" : ""),
        // PostgreSQL: the waiters counted in the record while its hold lives.
        fmt::arg("waiters", postgres ? ", waiters integer NOT NULL DEFAULT 0" : ""));
  };

  // fence_floor: the largest fence purge removed; new rows start above it, so that a holder
  // whose record was purged never matches a later claim's fence.
  create_schema_table = fill(
      "CREATE TABLE IF NOT EXISTS {sch} (version {i64} NOT NULL, "
      "fence_floor {i64} NOT NULL DEFAULT 0)");
  create_records_table = fill(
      "CREATE TABLE IF NOT EXISTS {rec} ("
      "key {blob} PRIMARY KEY, state {i16} NOT NULL, fp_hi {i64} NOT NULL, "
      "fp_lo {i64} NOT NULL, fence {i64} NOT NULL, took_over {i16} NOT NULL DEFAULT 0, "
      "lease_until {i64} NOT NULL, expires_at {i64} NOT NULL, result {blob}{waiters}){suffix}");
  create_expiry_index = fill("CREATE INDEX IF NOT EXISTS {rec}_expires_at ON {rec} (expires_at)");
  insert_version =
      fill("INSERT INTO {sch} (version) SELECT {version} WHERE NOT EXISTS (SELECT 1 FROM {sch})");
  select_version = fill("SELECT max(version) FROM {sch}");

  const std::string drawn = fmt::format(fmt::runtime(d.next_fence), fences) + ", ";
  // The first column: 1 acquired (the rest padding), 0 the row in the way.
  const std::string upsert_text = std::string(kUpsertInto) + kUpsertValues + kUpsertOnConflict;
  // A finished record that has not expired is answered as it is read (`settled`): the upsert
  // would lock its row and change nothing, and on PostgreSQL a row lock is a write the server
  // commits (and flushes, when durable). Any other record goes to the upsert.
  const std::string in_one = fmt::format(
      "WITH settled AS (SELECT fence, took_over, state, fp_hi, fp_lo, lease_until - {{now}} AS "
      "lease_left, expires_at - {{now}} AS expire_left, result FROM {{rec}} "
      "WHERE key = {{p1}} AND state IN ({{finished}}) AND expires_at > {{now}}), "
      "claimed AS ({}{}{}) "
      "SELECT 1, fence, took_over, 0, 0, 0, 0, 0, NULL FROM claimed "
      "UNION ALL SELECT 0, fence, took_over, state, fp_hi, fp_lo, lease_left, expire_left, result "
      "FROM settled "
      "UNION ALL SELECT 0, fence, took_over, {} FROM {{rec}} "
      "WHERE key = {{p1}} AND NOT EXISTS (SELECT 1 FROM claimed) "
      "AND NOT EXISTS (SELECT 1 FROM settled)",
      kUpsertInto, kUpsertUnlessSettled, kUpsertOnConflict,
      "state, fp_hi, fp_lo, lease_until - {now}, expires_at - {now}, result");
  upsert = fill(upsert_text.c_str());
  upsert_drawn = fill(upsert_text.c_str(), drawn);
  read = fill(fmt::format("SELECT {} FROM {{rec}} WHERE key = {{p1}}", kReadColumns).c_str());
  claim_in_one = fill(in_one.c_str());
  claim_in_one_drawn = fill(in_one.c_str(), drawn);
  finish = fill(
      "UPDATE {rec} SET state = {p3}, result = {p4}, expires_at = {now} + {p5} "
      "WHERE key = {p1} AND fence = {p2} AND state = {held}");
  release = fill(
      "UPDATE {rec} SET state = {released}, result = NULL "
      "WHERE key = {p1} AND fence = {p2} AND state = {held}");
  extend = fill(
      "UPDATE {rec} SET lease_until = {now} + {p3}, "
      "expires_at = {greatest}(expires_at, {now} + 2 * {p3}) "
      "WHERE key = {p1} AND fence = {p2} AND state = {held}");
  purge = fill(
      "DELETE FROM {rec} WHERE key IN "
      "(SELECT key FROM {rec} WHERE expires_at <= {now} LIMIT {p1}) RETURNING fence");
  raise_floor = fill("UPDATE {sch} SET fence_floor = {greatest}(fence_floor, {p1})");

  steps = prefix + "steps";
  step_triggers = {steps + "_end", steps + "_gone", steps + "_expired"};
  create_steps.push_back(
      fill("CREATE TABLE IF NOT EXISTS {steps} (key {blob} NOT NULL, idx {i64} NOT NULL, "
           "name {blob} NOT NULL, fp_hi {i64} NOT NULL, fp_lo {i64} NOT NULL, result {blob}, "
           "PRIMARY KEY (key, idx)){suffix}"));
  if (postgres) {
    create_steps.push_back(
        fill("CREATE OR REPLACE FUNCTION {steps}_drop() RETURNS trigger LANGUAGE plpgsql AS "
             "$idem$ BEGIN DELETE FROM {steps} WHERE key = OLD.key; RETURN NULL; END $idem$"));
    create_steps.push_back(
        fill("CREATE OR REPLACE TRIGGER {steps}_end AFTER UPDATE OF state ON {rec} FOR EACH ROW "
             "WHEN (NEW.state IN ({finished})) EXECUTE FUNCTION {steps}_drop()"));
    create_steps.push_back(
        fill("CREATE OR REPLACE TRIGGER {steps}_gone AFTER DELETE ON {rec} FOR EACH ROW "
             "EXECUTE FUNCTION {steps}_drop()"));
    // A claim of an expired record starts a new run: the expired run's steps go.
    create_steps.push_back(fill(
        "CREATE OR REPLACE TRIGGER {steps}_expired AFTER UPDATE OF fence ON {rec} FOR EACH ROW "
        "WHEN (OLD.expires_at <= {now}) EXECUTE FUNCTION {steps}_drop()"));
  } else {
    create_steps.push_back(
        fill("CREATE TRIGGER IF NOT EXISTS {steps}_end AFTER UPDATE OF state ON {rec} "
             "WHEN NEW.state IN ({finished}) BEGIN DELETE FROM {steps} WHERE key = NEW.key; END"));
    create_steps.push_back(
        fill("CREATE TRIGGER IF NOT EXISTS {steps}_gone AFTER DELETE ON {rec} "
             "BEGIN DELETE FROM {steps} WHERE key = OLD.key; END"));
    create_steps.push_back(
        fill("CREATE TRIGGER IF NOT EXISTS {steps}_expired AFTER UPDATE OF fence ON {rec} "
             "WHEN OLD.expires_at <= {now} BEGIN DELETE FROM {steps} WHERE key = NEW.key; END"));
  }
  save_step = fill(
      "INSERT INTO {steps} (key, idx, name, fp_hi, fp_lo, result) "
      "SELECT key, {p2}, {p3}, fp_hi, fp_lo, {p4} FROM {rec} "
      "WHERE key = {p1} AND fence = {p5} AND state = {held}{lock} "
      "ON CONFLICT (key, idx) DO UPDATE SET name = excluded.name, fp_hi = excluded.fp_hi, "
      "fp_lo = excluded.fp_lo, result = excluded.result");
  find_abandoned = fill(
      "SELECT r.key, s.result FROM {rec} r JOIN {steps} s ON s.key = r.key AND s.idx = -1 "
      "AND s.fp_hi = r.fp_hi AND s.fp_lo = r.fp_lo "
      "WHERE substr(r.key, 1, {p3}) = {p1} AND r.expires_at > {now} "
      "AND (r.state = {released} OR (r.state = {held} AND r.lease_until <= {now})) LIMIT {p2}");
  holding = fill("SELECT fence FROM {rec} WHERE key = {p1} AND fence = {p2} AND state = {held}");
  entity_ops = prefix + "entity_ops";
  entity_fences = prefix + "entity_fences";
  create_entity_ops.push_back(fill(
      fmt::format("CREATE TABLE IF NOT EXISTS {} (key {{blob}} PRIMARY KEY, entity TEXT NOT NULL, "
                  "fence {{i64}} NOT NULL, state {{i16}} NOT NULL, fp_hi {{i64}} NOT NULL, "
                  "fp_lo {{i64}} NOT NULL, produced TEXT NOT NULL, result {{blob}}, "
                  "created_ms {{i64}} NOT NULL){{suffix}}",
                  entity_ops)
          .c_str()));
  // CACHE 1 (the default): nextval() hands values out in call order.
  const auto sequence = [](const std::string& name) {
    return "CREATE SEQUENCE IF NOT EXISTS " + name + " AS bigint CACHE 1";
  };
  if (postgres) create_entity_ops.push_back(sequence(entity_fences));
  std::vector<std::string> create_wake;
  if (postgres) {
    // A hold's end (commit, abort, release, forget, takeover, purge) notifies only when a waiter
    // counted itself in the record: NOTIFY takes a database-wide lock at commit, which a record
    // nobody waits for must not pay. The check is the triggers' WHEN, a comparison per row.
    wake_channel = records + "_wake";
    wake_triggers = {records + "_wake", records + "_wake_gone"};
    const std::string payload = "md5(OLD.key) || ' ' || OLD.fence";
    // ALTER TABLE locks the table even when the column is there: only when it is missing.
    create_wake.push_back(fill(
        "DO $idem$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = "
        "'{rec}'::regclass AND attname = 'waiters' AND NOT attisdropped) THEN "
        "ALTER TABLE {rec} ADD COLUMN waiters integer NOT NULL DEFAULT 0; END IF; END $idem$"));
    create_wake.push_back(fmt::format(
        "CREATE OR REPLACE FUNCTION {0}_wake() RETURNS trigger LANGUAGE plpgsql AS $idem$ BEGIN "
        "PERFORM pg_notify('{1}', {2}); IF TG_OP = 'DELETE' THEN RETURN OLD; END IF; "
        "NEW.waiters := 0; RETURN NEW; END $idem$",
        records, wake_channel, payload));
    create_wake.push_back(
        fill("CREATE OR REPLACE TRIGGER {rec}_wake BEFORE UPDATE OF state, fence ON {rec} "
             "FOR EACH ROW WHEN (OLD.waiters > 0) EXECUTE FUNCTION {rec}_wake()"));
    create_wake.push_back(
        fill("CREATE OR REPLACE TRIGGER {rec}_wake_gone AFTER DELETE ON {rec} "
             "FOR EACH ROW WHEN (OLD.waiters > 0) EXECUTE FUNCTION {rec}_wake()"));
    count_waiter = fill(
        "UPDATE {rec} SET waiters = waiters + 1 WHERE key = {p1} AND fence = {p2} "
        "AND state = {held} RETURNING md5(key) || ' ' || fence");
  }
  upgrade_version = fill("UPDATE {sch} SET version = {version} WHERE version < {version}");
  schema_ddl = {create_schema_table, create_records_table, create_expiry_index};
  if (postgres) schema_ddl.push_back(sequence(fences));
  schema_ddl.insert(schema_ddl.end(), create_steps.begin(), create_steps.end());
  schema_ddl.insert(schema_ddl.end(), create_entity_ops.begin(), create_entity_ops.end());
  schema_ddl.insert(schema_ddl.end(), create_wake.begin(), create_wake.end());
  schema_ddl.push_back(insert_version);
  schema_ddl.push_back(upgrade_version);

  load_steps = fill(
      "SELECT s.idx, s.name, s.result FROM {rec} r LEFT JOIN {steps} s ON s.key = r.key "
      "AND s.idx >= 0 AND s.fp_hi = r.fp_hi AND s.fp_lo = r.fp_lo "
      "WHERE r.key = {p1} AND r.fence = {p2} AND r.state = {held} ORDER BY s.idx");
}

}  // namespace idem::sql
