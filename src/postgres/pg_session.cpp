#include "postgres/pg_session.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <array>
#include <bit>
#include <stdexcept>
#include <utility>

#include "postgres/pg_schema.hpp"
#include "postgres/pg_values.hpp"

namespace idem::postgres::detail {

namespace {

using std::chrono::milliseconds;

std::int64_t as_i64(std::uint64_t v) { return std::bit_cast<std::int64_t>(v); }

constexpr const char* kClaim = "idem_claim";
constexpr const char* kClaimDrawn = "idem_claim_drawn";
constexpr const char* kFinish = "idem_finish";
constexpr const char* kRelease = "idem_release";
constexpr const char* kExtend = "idem_extend";
constexpr const char* kPurge = "idem_purge";
constexpr const char* kRaiseFloor = "idem_raise_floor";
constexpr const char* kRead = "idem_read";
constexpr const char* kFinishHeld = "idem_finish_held";

constexpr std::string_view kNoLockTimeout = "SET LOCAL lock_timeout = 0; ";  // until COMMIT
constexpr const char* kNotHeld = "idem: lease lost: the finish matched ";    // kFinishHeld's error

std::string timeouts_text(milliseconds statement, milliseconds lock) {
  return fmt::format("SET statement_timeout = {}; SET lock_timeout = {}", statement.count(),
                     lock.count());
}

// A statement's single integer (a schema version); -1 when there is none.
std::int64_t single_integer(const Reply& r) {
  std::int64_t v = -1;
  if (r.row_count() < 1 || !r.integer(0, 0, v)) return -1;
  return v;
}

}  // namespace

PgSession::PgSession(const std::string& conninfo, milliseconds connect_budget,
                     const sql::Statements& text, milliseconds statement_timeout, Role role)
    : link_(conninfo, connect_budget),
      records_(text.records),
      statement_timeout_(statement_timeout) {
  server_process_ = PQbackendPID(link_.raw());
  set_timeouts(statement_timeout_, milliseconds{0});
  if (role == Role::replica) {
    // The replica never creates the schema: it must have replicated this library's version.
    const std::int64_t version = single_integer(script(text.select_version));
    if (version != text.version) {
      throw UnusableServer(
          fmt::format("idem: replica table {} says schema version {}, this "
                      "library knows {}",
                      text.schema, version, text.version));
    }
    declare(kRead, text.read);
    return;
  }
  declare(kClaim, text.claim_in_one);
  declare(kClaimDrawn, text.claim_in_one_drawn);
  declare(kFinish, text.finish);
  // A transactional finish, sent with COMMIT: an error when it matches no row, so that the
  // COMMIT does not run (the cast depends on count(*): not evaluated at planning time).
  declare(kFinishHeld,
          fmt::format("WITH finished AS ({} RETURNING 1) SELECT CASE WHEN count(*) = 1 "
                      "THEN 1 ELSE CAST('{}' || count(*) || ' rows' AS int) END "
                      "FROM finished",
                      text.finish, kNotHeld));
  declare(kRelease, text.release);
  declare(kExtend, text.extend);
  declare(kPurge, text.purge);
  declare(kRaiseFloor, text.raise_floor);
  declare(kRead, text.read);
  declare_batches(text);
}

PgSession::~PgSession() { rollback(); }

void PgSession::create_schema(const sql::Statements& text) {
  script("BEGIN");
  try {
    const Reply found = script(schema_probe(text));
    if (found.row_count() != 1 || found.column_count() != 3) {
      throw UnusableServer("idem: postgres: the schema probe answered no row");
    }
    // A hot standby given as the primary: say so now rather than fail every claim.
    if (found.text(0, 1) == "on") throw UnusableServer(kReadOnly);
    const bool tables = found.text(0, 0) == "t";
    auto version = [&] { return single_integer(script(text.select_version)); };
    auto earlier = [&] {
      const std::int64_t v = version();
      return v >= 1 && v < text.version;
    };
    if (!tables || found.text(0, 2) != "t" || earlier()) {
      script(kSchemaLock);
      for (const std::string& ddl : schema_ddl(text, tables)) script(ddl);
    }
    if (const std::int64_t found_version = version(); found_version != text.version) {
      throw UnusableServer(
          fmt::format("idem: table {} says schema version {}, this library knows {}", text.schema,
                      found_version, text.version));
    }
    script("COMMIT");
  } catch (...) {
    try {
      script("ROLLBACK");  // under a deadline too
    } catch (...) {        // the connection is gone: the server rolls back by itself
    }
    throw;
  }
}

std::optional<sql::ClaimRow> PgSession::claim(const sql::ClaimArgs& args) {
  // Transactional: BEGIN, the key's lock, and the claim drawing its fence, in one message; the
  // lock first, since INSERT evaluates nextval() before it waits (docs/sql.md#fences).
  const bool transactional = work_ != nullptr;
  const char* name = transactional ? kClaimDrawn : kClaim;
  Reply r;
  if (transactional && !work_->begun()) {
    hold(records_, args.key);
    r = work_->open_with(
        execute(name, {hex_bytea(args.key), std::to_string(as_i64(args.fingerprint.high)),
                       std::to_string(as_i64(args.fingerprint.low)), std::to_string(args.min_fence),
                       std::to_string(args.lease_ms), std::to_string(args.keep_ms)}));
  } else {
    Query q = prepared(name);
    add_claim(q, args);
    r = send(q);
  }
  if (r.row_count() == 0) return std::nullopt;
  return claim_row(r, 0, 0);
}

std::optional<sql::ClaimRow> PgSession::read(std::string_view key) {
  Query q = prepared(kRead);
  q.params.bytes(key);
  const Reply r = call(q);
  if (r.row_count() == 0) return std::nullopt;
  return read_row(r, 0);
}

bool PgSession::finish(const Ticket& ticket, sql::State state, std::string_view result,
                       std::int64_t ttl_ms) {
  Query q = prepared(kFinish);
  add_finish(q, ticket, state, result, ttl_ms);
  return send(q).affected == 1;
}

bool PgSession::release(const Ticket& ticket) {
  Query q = prepared(kRelease);
  add_ticket(q, ticket);
  return send(q).affected == 1;
}

bool PgSession::extend(const Ticket& ticket, std::int64_t lease_ms) {
  Query q = prepared(kExtend);
  add_ticket(q, ticket);
  q.params.number(lease_ms);
  return send(q).affected == 1;
}

std::size_t PgSession::purge(std::size_t max_rows) {
  Query purge = prepared(kPurge);
  purge.params.number(static_cast<std::int64_t>(std::min<std::size_t>(max_rows, INT64_MAX)));
  Query raise = prepared(kRaiseFloor);
  script("BEGIN");
  try {
    const Reply gone = call(purge);
    std::int64_t top = 0;
    for (int i = 0; i < gone.row_count(); ++i) {
      std::int64_t fence = 0;
      if (gone.integer(i, 0, fence)) top = std::max(top, fence);
    }
    if (gone.row_count() > 0) {
      raise.params.number(top);
      call(raise);
    }
    script("COMMIT");
    return static_cast<std::size_t>(gone.row_count());
  } catch (...) {
    try {
      script("ROLLBACK");
    } catch (...) {  // the connection is gone: the server rolls back by itself
    }
    throw;
  }
}

// Sends nothing: the settings and BEGIN go with the transaction's first statement.
void PgSession::begin(milliseconds block_for) {
  // lock_timeout bounds the wait on the holder; zero would mean "forever" to PostgreSQL.
  const milliseconds lock = std::max(block_for, milliseconds{1});
  const milliseconds statement = std::max(statement_timeout_, block_for + milliseconds{1000});
  std::string preamble;
  limit_sent_ = std::max(limit_sent_, statement);
  if (statement != current_statement_ || lock != current_lock_) {
    preamble = timeouts_text(statement, lock) + "; ";
    current_statement_ = statement;  // forgotten if the transaction rolls back
    current_lock_ = lock;
  }
  if (!handlers_) handlers_.emplace(link_.raw());
  work_ = std::make_unique<PgTransaction>(handlers_->get(), std::move(preamble),
                                          [this](const std::string& sql) { return script(sql); });
}

// The advisory lock of a 64-bit hash of (table, key): two keys share one with odds of 2^-64.
void PgSession::hold(std::string_view table, std::string_view key) {
  const std::uint64_t h =
      XXH3_64bits_withSeed(key.data(), key.size(), XXH3_64bits(table.data(), table.size()));
  work_->send_first(fmt::format("SELECT pg_advisory_xact_lock({})", as_i64(h)));
}

void PgSession::commit() {
  std::unique_ptr<PgTransaction> tx = std::move(work_);
  try {
    tx->commit_with(std::string(kNoLockTimeout) + "SELECT 1");
  } catch (...) {
    forget_timeouts();
    throw;
  }
}

// One round trip: the fenced finish, then COMMIT, without the claim's lock_timeout (maybe 1 ms),
// which the finish must not fail on.
bool PgSession::finish_and_commit(const Ticket& ticket, sql::State state, std::string_view result,
                                  std::int64_t ttl_ms) {
  std::unique_ptr<PgTransaction> tx = std::move(work_);
  try {
    tx->commit_with(std::string(kNoLockTimeout) +
                    execute(kFinishHeld, {hex_bytea(ticket.key),
                                          std::to_string(static_cast<std::int64_t>(ticket.fence)),
                                          std::to_string(static_cast<int>(state)),
                                          hex_bytea(result), std::to_string(ttl_ms)}));
  } catch (const PgError& e) {
    forget_timeouts();
    if (e.sqlstate == "22P02" &&
        std::string_view(e.what()).find(kNotHeld) != std::string_view::npos) {
      return false;  // rolled back
    }
    throw;
  } catch (...) {
    forget_timeouts();
    throw;
  }
  return true;
}

void PgSession::rollback() noexcept {
  std::unique_ptr<PgTransaction> tx = std::move(work_);
  if (!tx) return;
  forget_timeouts();  // settings sent in the transaction roll back with it
  tx->abort();
}

void PgSession::mark() { script("SAVEPOINT idem_handler"); }

void PgSession::rollback_to_mark() { script("ROLLBACK TO SAVEPOINT idem_handler"); }

void PgSession::step_savepoint() {
  if (!work_->begun()) {
    work_->open_with("SAVEPOINT idem_step");
  } else {
    script("SAVEPOINT idem_step");
  }
}

// ROLLBACK TO SAVEPOINT also ends the aborted state a failed statement left the transaction in.
void PgSession::end_step(bool keep) {
  script(keep ? "RELEASE SAVEPOINT idem_step"
              : "ROLLBACK TO SAVEPOINT idem_step; RELEASE SAVEPOINT idem_step");
}

std::int64_t PgSession::run(const std::string& sql, std::span<const sql::Param> params) {
  return static_cast<std::int64_t>(generic(sql, params).affected);
}

bool PgSession::first_row(const std::string& sql, std::span<const sql::Param> params, sql::Row& row,
                          unsigned blob_columns) {
  const Reply r = generic(sql, params);
  row.clear();
  if (r.row_count() == 0) return false;
  row = cells(r, 0, blob_columns);
  return true;
}

std::vector<sql::Row> PgSession::rows(const std::string& sql, std::span<const sql::Param> params,
                                      unsigned blob_columns) {
  return rows_of(generic(sql, params), blob_columns);
}

Reply PgSession::generic(const std::string& sql, std::span<const sql::Param> params) {
  auto it = generic_.find(sql);
  if (it == generic_.end()) {
    std::string name = "idem_g" + std::to_string(generic_.size());
    declare(name, sql);
    it = generic_.emplace(sql, std::move(name)).first;
  }
  std::vector<std::string> values = text_values(params);
  if (work_ && !work_->begun()) return work_->open_with(execute(it->second, values));
  Query q = prepared(it->second);
  q.values = std::move(values);
  return send(q);
}

bool PgSession::transaction_ended(std::int64_t process) {
  // pg_stat_activity shows another backend's state to its own role (the store's connections
  // share one) and is current, not sampled. No row: the process has exited, its transaction
  // with it. "idle": it committed or rolled back and waits for a query that will not come;
  // "idle in transaction (aborted)": it can only roll back.
  const std::array<sql::Param, 1> pid{sql::Param{sql::Param::integer, process, {}}};
  sql::Row row;
  if (!first_row("SELECT state FROM pg_stat_activity WHERE pid = $1", pid, row, 0)) return true;
  const std::string state = row.empty() ? std::string() : row[0].value_or(std::string());
  return state == "idle" || state == "idle in transaction (aborted)";
}

Reply PgSession::send(const Query& query) {
  if (work_ && !work_->begun()) work_->open_with({});  // not after a claim: BEGIN on its own
  return call(query);
}

void PgSession::declare(const std::string& name, std::string text) {
  statements_.insert_or_assign(name, Statement{std::move(text), false});
}

Query PgSession::prepared(const std::string& name) {
  const auto it = statements_.find(name);
  if (it == statements_.end()) throw std::logic_error("idem: statement " + name + " unknown");
  // Its name in the map outlives the query.
  if (!it->second.prepared) {
    call(Query{.kind = Query::prepare, .name = it->first.c_str(), .sql = it->second.text});
    it->second.prepared = true;
  }
  return Query{.kind = Query::prepared, .name = it->first.c_str()};
}

std::string PgSession::execute(const std::string& name, const std::vector<std::string>& values) {
  prepared(name);  // SQL's EXECUTE needs it on the server
  std::string sql = "EXECUTE ";
  sql += name;
  for (std::size_t i = 0; i < values.size(); ++i) {
    sql += i == 0 ? "('" : ", '";
    sql += link_.escape(values[i]);
    sql += '\'';
  }
  if (!values.empty()) sql += ')';
  return sql;
}

void PgSession::set_timeouts(milliseconds statement, milliseconds lock) {
  if (statement == current_statement_ && lock == current_lock_) return;
  limit_sent_ = std::max(limit_sent_, statement);
  script(timeouts_text(statement, lock));
  current_statement_ = statement;
  current_lock_ = lock;
}

}  // namespace idem::postgres::detail
