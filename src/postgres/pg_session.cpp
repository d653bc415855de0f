
#include "postgres/pg_session.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <xxhash.h>

#include <bit>
#include <type_traits>
#include <utility>

#include "postgres/pg_schema.hpp"
#include "postgres/pg_values.hpp"

namespace idem::postgres::detail {

namespace {

using std::chrono::milliseconds;

std::int64_t as_i64(std::uint64_t v) { return std::bit_cast<std::int64_t>(v); }
std::uint64_t as_u64(std::int64_t v) { return std::bit_cast<std::uint64_t>(v); }

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

}  // namespace

NoReply::NoReply(milliseconds budget)
    : std::runtime_error(fmt::format(
          "idem: no reply from PostgreSQL within {} ms; connection dropped (a statement on its "
          "way may or may not have run)",
          budget.count())) {}

template <class... Args>
pqxx::result PgSession::run(const char* name, Args&&... args) {
  return watched([&] {
    if (work_) {
      if (!work_->begun()) work_->open_with({});  // not after a claim: BEGIN on its own
      return exec_prepared(work_->handle(), prepared(name), std::forward<Args>(args)...);
    }
    pqxx::nontransaction tx(conn_);
    return exec_prepared(tx, prepared(name), std::forward<Args>(args)...);
  });
}

template <class F>
auto PgSession::watched(F&& f, int statements) -> decltype(f()) {
  if (watching_) return f();
  const milliseconds budget = statement_limit() * statements + kReplyMargin;
  watching_ = true;
  watch_.arm(budget);
  try {
    if constexpr (std::is_void_v<decltype(f())>) {
      f();
      end_watch();
    } else {
      auto result = f();
      end_watch();
      return result;
    }
  } catch (...) {
    if (end_watch()) throw NoReply(budget);
    throw;
  }
}

PgSession::PgSession(const std::string& conninfo, milliseconds connect_budget,
                     const sql::Statements& text, milliseconds statement_timeout, Role role,
                     ReplyWatchdog& watchdog)
    : conn_(conninfo, connect_budget),
      watch_(watchdog, conn_.sock()),
      records_(text.records),
      statement_timeout_(statement_timeout) {
  set_timeouts(statement_timeout_, milliseconds{0});
  if (role == Role::replica) {
    // The replica never creates the schema: it must have replicated this library's version.
    const auto version = watched([&] {
      pqxx::nontransaction tx(conn_);
      const pqxx::result r = tx.exec(text.select_version);
      return r.at(0).at(0).as<long long>(-1);
    });
    if (version != sql::kSchemaVersion) {
      throw UnusableServer(
          fmt::format("idem: replica table {} says schema version {}, this "
                      "library knows {}",
                      text.schema, version, sql::kSchemaVersion));
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

bool PgSession::looks_alive() const noexcept {
  if (!is_open()) return false;
  const int fd = conn_.sock();
  if (fd < 0) return false;
  pollfd p{fd, POLLIN, 0};
  const int n = ::poll(&p, 1, 0);
  return n == 0;
}

void PgSession::create_schema(const sql::Statements& text) {
  std::optional<pqxx::work> tx;
  watched([&] { tx.emplace(conn_); });  // BEGIN
  auto exec = [&](const std::string& sql) { return watched([&] { return tx->exec(sql); }); };
  try {
    const pqxx::row found = exec(schema_probe(text)).at(0);
    // A hot standby given as the primary: say so now rather than fail every claim.
    if (found.at(1).as<std::string>() == "on") throw UnusableServer(kReadOnly);
    const bool tables = found.at(0).as<bool>();
    auto version = [&] { return exec(text.select_version).at(0).at(0).as<long long>(-1); };
    auto earlier = [&] {
      const long long v = version();
      return v >= 1 && v < sql::kSchemaVersion;
    };
    if (!tables || !found.at(2).as<bool>() || earlier()) {
      exec(kSchemaLock);
      for (const std::string& ddl : schema_ddl(text, tables)) exec(ddl);
    }
    if (const long long found_version = version(); found_version != sql::kSchemaVersion) {
      throw UnusableServer(
          fmt::format("idem: table {} says schema version {}, this library knows {}", text.schema,
                      found_version, sql::kSchemaVersion));
    }
    watched([&] { tx->commit(); });
  } catch (...) {
    try {
      watched([&] { tx->abort(); });  // ROLLBACK, under a deadline too
    } catch (...) {                   // the connection is gone: the server rolls back by itself
    }
    throw;
  }
}

std::optional<sql::ClaimRow> PgSession::claim(const sql::ClaimArgs& args) {
  // Transactional: BEGIN, the key's lock, and the claim drawing its fence, in one message; the
  // lock first, since INSERT evaluates nextval() before it waits (docs/sql.md#fences).
  const bool transactional = work_ != nullptr;
  if (transactional && !work_->begun()) hold(records_, args.key);
  const char* name = transactional ? kClaimDrawn : kClaim;
  const pqxx::result r = watched([&] {
    return work_ && !work_->begun()
               ? work_->open_with(execute(
                     name,
                     {hex_bytea(args.key), std::to_string(as_i64(args.fingerprint.high)),
                      std::to_string(as_i64(args.fingerprint.low)), std::to_string(args.min_fence),
                      std::to_string(args.lease_ms), std::to_string(args.keep_ms)}))
               : run(name, bytes_param(args.key), as_i64(args.fingerprint.high),
                     as_i64(args.fingerprint.low), static_cast<std::int64_t>(args.min_fence),
                     args.lease_ms, args.keep_ms);
  });
  if (r.empty()) return std::nullopt;
  return claim_row(r[0], 0);
}

std::optional<sql::ClaimRow> PgSession::read(std::string_view key) {
  const pqxx::result r = watched([&] {
    pqxx::nontransaction tx(conn_);
    return exec_prepared(tx, prepared(kRead), bytes_param(key));
  });
  if (r.empty()) return std::nullopt;
  const auto row = r[0];
  sql::ClaimRow out;
  out.state = static_cast<std::int16_t>(row[0].as<int>());
  out.fingerprint = {as_u64(row[1].as<std::int64_t>()), as_u64(row[2].as<std::int64_t>())};
  out.fence = static_cast<Fence>(row[3].as<std::int64_t>());
  out.lease_left_ms = row[4].as<std::int64_t>();
  out.expire_left_ms = row[5].as<std::int64_t>();
  out.result = field_bytes(row[6]);
  return out;
}

bool PgSession::finish(const Ticket& ticket, sql::State state, std::string_view result,
                       std::int64_t ttl_ms) {
  return affected_rows(run(kFinish, bytes_param(ticket.key),
                           static_cast<std::int64_t>(ticket.fence), static_cast<int>(state),
                           bytes_param(result), ttl_ms)) == 1;
}

bool PgSession::release(const Ticket& ticket) {
  return affected_rows(
             run(kRelease, bytes_param(ticket.key), static_cast<std::int64_t>(ticket.fence))) == 1;
}

bool PgSession::extend(const Ticket& ticket, std::int64_t lease_ms) {
  return affected_rows(run(kExtend, bytes_param(ticket.key),
                           static_cast<std::int64_t>(ticket.fence), lease_ms)) == 1;
}

std::size_t PgSession::purge(std::size_t max_rows) {
  return watched(
      [&] {
        pqxx::work tx(conn_);
        const pqxx::result gone =
            exec_prepared(tx, prepared(kPurge),
                          static_cast<std::int64_t>(std::min<std::size_t>(max_rows, INT64_MAX)));
        std::int64_t top = 0;
        for (const auto& row : gone) top = std::max(top, row[0].as<std::int64_t>());
        if (!gone.empty()) exec_prepared(tx, prepared(kRaiseFloor), top);
        tx.commit();
        return gone.size();
      },
      2);  // statements
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
  work_ = std::make_unique<PgTransaction>(conn_, std::move(preamble));
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
    watched([&] { tx->commit_with(std::string(kNoLockTimeout) + "SELECT 1"); });
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
    watched([&] {
      tx->commit_with(std::string(kNoLockTimeout) +
                      execute(kFinishHeld, {hex_bytea(ticket.key),
                                            std::to_string(static_cast<std::int64_t>(ticket.fence)),
                                            std::to_string(static_cast<int>(state)),
                                            hex_bytea(result), std::to_string(ttl_ms)}));
    });
  } catch (const pqxx::sql_error& e) {
    forget_timeouts();
    if (e.sqlstate() == "22P02" &&
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
  try {
    watched([&] { tx->abort(); });
  } catch (...) {  // a broken connection rolled back on the server already
  }
}

void PgSession::mark() {
  watched([&] { work_->handle().exec("SAVEPOINT idem_handler"); });
}

void PgSession::rollback_to_mark() {
  watched([&] { work_->handle().exec("ROLLBACK TO SAVEPOINT idem_handler"); });
}

void PgSession::step_savepoint() {
  watched([&] {
    if (!work_->begun()) {
      work_->open_with("SAVEPOINT idem_step");
    } else {
      work_->handle().exec("SAVEPOINT idem_step");
    }
  });
}

// ROLLBACK TO SAVEPOINT also ends the aborted state a failed statement left the transaction in.
void PgSession::end_step(bool keep) {
  watched([&] {
    work_->handle().exec(keep ? "RELEASE SAVEPOINT idem_step"
                              : "ROLLBACK TO SAVEPOINT idem_step; RELEASE SAVEPOINT idem_step");
  });
}

std::int64_t PgSession::run(const std::string& sql, std::span<const sql::Param> params) {
  return static_cast<std::int64_t>(affected_rows(generic(sql, params)));
}

bool PgSession::first_row(const std::string& sql, std::span<const sql::Param> params, sql::Row& row,
                          unsigned blob_columns) {
  const pqxx::result r = generic(sql, params);
  row.clear();
  if (r.empty()) return false;
  row = cells(r[0], blob_columns);
  return true;
}

std::vector<sql::Row> PgSession::rows(const std::string& sql, std::span<const sql::Param> params,
                                      unsigned blob_columns) {
  return rows_of(generic(sql, params), blob_columns);
}

pqxx::result PgSession::generic(const std::string& sql, std::span<const sql::Param> params) {
  return watched([&] { return generic_unwatched(sql, params); });
}

pqxx::result PgSession::generic_unwatched(const std::string& sql,
                                          std::span<const sql::Param> params) {
  auto it = generic_.find(sql);
  if (it == generic_.end()) {
    std::string name = "idem_g" + std::to_string(generic_.size());
    declare(name, sql);
    it = generic_.emplace(sql, std::move(name)).first;
  }
  const std::vector<std::string> values = text_values(params);
  if (work_ && !work_->begun()) return work_->open_with(execute(it->second, values));
  if (work_) return exec_prepared_texts(work_->handle(), prepared(it->second), values);
  pqxx::nontransaction tx(conn_);
  return exec_prepared_texts(tx, prepared(it->second), values);
}

pqxx::result PgSession::run_texts(const char* name, const std::vector<std::string>& values) {
  return watched([&] {
    pqxx::nontransaction tx(conn_);
    return exec_prepared_texts(tx, prepared(name), values);
  });
}

void PgSession::declare(const std::string& name, std::string text) {
  statements_.insert_or_assign(name, Statement{std::move(text), false});
}

const std::string& PgSession::prepared(const std::string& name) {
  const auto it = statements_.find(name);
  if (it == statements_.end()) throw std::logic_error("idem: statement " + name + " unknown");
  if (!it->second.prepared) {
    prepare(conn_, it->first, it->second.text);
    it->second.prepared = true;
  }
  return it->first;
}

std::string PgSession::execute(const std::string& name, const std::vector<std::string>& values) {
  prepared(name);  // SQL's EXECUTE needs it on the server
  std::string sql = "EXECUTE ";
  sql += name;
  for (std::size_t i = 0; i < values.size(); ++i) {
    sql += i == 0 ? "('" : ", '";
    sql += conn_.esc(values[i]);
    sql += '\'';
  }
  if (!values.empty()) sql += ')';
  return sql;
}

void PgSession::set_timeouts(milliseconds statement, milliseconds lock) {
  if (statement == current_statement_ && lock == current_lock_) return;
  limit_sent_ = std::max(limit_sent_, statement);
  watched([&] {
    pqxx::nontransaction tx(conn_);
    tx.exec(timeouts_text(statement, lock));
  });
  current_statement_ = statement;
  current_lock_ = lock;
}

}  // namespace idem::postgres::detail
