// PostgresStore: the SQL record strategy on libpqxx (6.4 or 7; the differences are in
// pqxx_compat.hpp). A pool of connections, each in one thread's hands at a time; statements
// prepared per connection at their first use; dead connections dropped.
// A transactional claim costs two round trips: BEGIN travels with the claim, COMMIT with the
// finish (PgTransaction).

#include "idem/stores/postgres_store.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "idem/stores/postgres_transaction.hpp"
#include "postgres/pg_connection.hpp"
#include "postgres/pqxx_compat.hpp"
#include "postgres/reply_watchdog.hpp"
#include "sql/engine.hpp"
#include "sql/replica_reads.hpp"
#include "sql/statements.hpp"

namespace idem {

namespace {

using std::chrono::milliseconds;

struct PoolError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The reply watchdog gave up on a round trip and shut the connection down.
struct NoReply : std::runtime_error {
  explicit NoReply(milliseconds budget)
      : std::runtime_error(fmt::format(
            "idem: no reply from PostgreSQL within {} ms; connection dropped (a statement on its "
            "way may or may not have run)",
            budget.count())) {}
};

// How long past the statement timeout in force a reply may take before the connection is given
// up: the server answers a statement it cancelled at once, so this is network time.
constexpr milliseconds kReplyMargin{1000};

std::int64_t as_i64(std::uint64_t v) { return std::bit_cast<std::int64_t>(v); }
std::uint64_t as_u64(std::int64_t v) { return std::bit_cast<std::uint64_t>(v); }

using pg::bytes_param;
using pg::field_bytes;

// bytea's text form: \x and two hex digits a byte.
std::string hex_bytea(std::string_view b) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex = "\\x";
  hex.reserve(2 + b.size() * 2);
  for (const unsigned char c : b) {
    hex.push_back(kHex[c >> 4]);
    hex.push_back(kHex[c & 15]);
  }
  return hex;
}

constexpr const char* kClaim = "idem_claim";
constexpr const char* kClaimDrawn = "idem_claim_drawn";
constexpr const char* kFinish = "idem_finish";
constexpr const char* kRelease = "idem_release";
constexpr const char* kExtend = "idem_extend";
constexpr const char* kPurge = "idem_purge";
constexpr const char* kRaiseFloor = "idem_raise_floor";
constexpr const char* kRead = "idem_read";
constexpr const char* kFinishHeld = "idem_finish_held";

// The error text of a transactional finish that matched no row (the kFinishHeld statement).
// Sent in front of a transaction's last statements: SET LOCAL lasts until its COMMIT.
constexpr std::string_view kNoLockTimeout = "SET LOCAL lock_timeout = 0; ";
constexpr const char* kNotHeld = "idem: lease lost: the finish matched ";

constexpr const char* kReadOnly =
    "idem: postgres server is read-only (a hot standby, or default_transaction_read_only is on): "
    "claims and commits need the primary";

// The claim's transaction; handlers see its handle() through pg_transaction(). BEGIN does not
// travel on its own: it goes in front of the transaction's first statement (open_with), and
// COMMIT goes behind its last one (commit_with), so that a claim and a finish are one round trip
// each. libpqxx's own transactions send BEGIN from their constructor, hence a
// pg::ManualTransaction, whose failed statements also leave the transaction to the server.
class PgTransaction final {
 public:
  // `preamble`: statements to run first in the same message (settings; they roll back with the
  // transaction).
  PgTransaction(pg::Connection& conn, std::string preamble)
      : begin_(std::move(preamble) + "BEGIN"), tx_(conn, [this] { send_commit(); }) {}
  PgTransaction(const PgTransaction&) = delete;
  PgTransaction& operator=(const PgTransaction&) = delete;

  // What handlers and the session's statements run on.
  pqxx::dbtransaction& handle() noexcept { return tx_; }

  bool begun() const noexcept { return begun_; }

  // Sends `statement` right after BEGIN, in the same message as the transaction's first
  // statement (at once if the transaction has begun).
  void send_first(const std::string& statement) {
    if (begun_) {
      tx_.exec(statement);
    } else {
      begin_ += "; " + statement;
    }
  }

  // Sends BEGIN and `statement` (may be empty) in one message; the statement's result.
  pqxx::result open_with(const std::string& statement) {
    begun_ = true;
    tx_.begun();  // from here on, ending the transaction sends ROLLBACK
    return tx_.exec(statement.empty() ? begin_ : begin_ + "; " + statement);
  }

  // Sends `statement` and COMMIT in one message. On failure the transaction is rolled back and
  // the error rethrown; a connection lost meanwhile is pqxx::in_doubt_error.
  void commit_with(std::string statement) {
    last_ = std::move(statement);
    committed_ = false;
    tx_.commit();
    if (!committed_) {
      // libpqxx saw the transaction committed already: the handler committed it itself.
      throw pqxx::usage_error(
          "idem: the claim's transaction was committed by the handler; "
          "the record was not finished in it");
    }
  }

  // Ends the transaction: ROLLBACK if anything was sent.
  void abort() { tx_.abort(); }

 private:
  // What the transaction's commit() sends.
  void send_commit() {
    if (!begun_) {
      committed_ = true;  // nothing was sent, nothing to end
      return;
    }
    const std::string message = last_.empty() ? std::string("COMMIT") : last_ + "; COMMIT";
    try {
      tx_.send(message);
    } catch (const pqxx::sql_error&) {
      if (!tx_.conn().is_open()) throw in_doubt();
      // A failed last statement skipped the COMMIT and left the transaction open and aborted;
      // a failed COMMIT ended it (then this ROLLBACK only draws a warning).
      try {
        tx_.send("ROLLBACK");
      } catch (...) {
        // The connection went: the server rolls back on its own.
      }
      throw;
    } catch (const std::exception&) {
      if (!tx_.conn().is_open()) throw in_doubt();
      throw;
    }
    committed_ = true;
  }

  static pqxx::in_doubt_error in_doubt() {
    return pqxx::in_doubt_error(
        "idem: connection lost while committing; the transaction may or may not have committed");
  }

  std::string begin_;
  std::string last_;
  bool begun_ = false;
  bool committed_ = false;
  pg::ManualTransaction tx_;  // last: it ends (ROLLBACK) while the rest is still there
};

// The primary takes every statement; a replica session only reads records.
enum class Role : std::uint8_t { primary, replica };

// Every round trip a session makes for the store runs under a reply deadline (watched()): the
// statement timeout in force plus kReplyMargin. Statements a transactional handler runs itself
// on the claim's transaction are bounded by the server's statement_timeout and by TCP
// (tcp_user_timeout, keepalives: pg_connection.hpp).
class PgSession final : public sql::Session {
 public:
  PgSession(const std::string& conninfo, milliseconds connect_budget, const sql::Statements& text,
            milliseconds statement_timeout, Role role, pg::ReplyWatchdog& watchdog)
      : conn_(conninfo, connect_budget),
        watch_(watchdog, conn_.sock()),
        records_(text.records),
        statement_timeout_(statement_timeout) {
    set_timeouts(statement_timeout_, milliseconds{0});
    if (role == Role::replica) {
      // The replica never creates the schema: it must have replicated the one this library
      // reads (a missing table is an error here, hence a fall-through to the primary).
      const auto version = watched([&] {
        pqxx::nontransaction tx(conn_);
        const pqxx::result r = tx.exec(text.select_version);
        return r.at(0).at(0).as<long long>(-1);
      });
      if (version != sql::kSchemaVersion) {
        throw PoolError(
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
    // The finish of a transactional claim, sent with COMMIT: an error when it matches no row,
    // so that the COMMIT behind it does not run. (The text depends on count(*), so it is not
    // evaluated at planning time.)
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
  }

  ~PgSession() override { rollback(); }

  // An idle connection the server closed (restart, idle timeout) has something to read: the
  // goodbye message or EOF. Such a connection is dropped before use, so that no statement is
  // ever sent on it and then retried in doubt.
  bool looks_alive() const noexcept {
    if (!is_open()) return false;
    const int fd = conn_.sock();
    if (fd < 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, 0);
    return n == 0;
  }

  bool is_open() const noexcept { return conn_.is_open() && !watch_.fired(); }

  // Each round trip under its own reply deadline (the advisory lock's wait is bounded by the
  // statement timeout too).
  void create_schema(const sql::Statements& text) {
    std::optional<pqxx::work> tx;
    watched([&] { tx.emplace(conn_); });  // BEGIN
    auto exec = [&](const std::string& sql) { return watched([&] { return tx->exec(sql); }); };
    try {
      // Tables already there: no DDL, because CREATE INDEX IF NOT EXISTS takes a share lock on
      // the table first, and would wait for every open transactional claim on it.
      const pqxx::row found =
          exec(fmt::format(
                   "SELECT to_regclass('{0}') IS NOT NULL AND to_regclass('{1}') IS NOT NULL AND "
                   "to_regclass('{1}_expires_at') IS NOT NULL, "
                   "current_setting('transaction_read_only'), to_regclass('{2}') IS NOT NULL",
                   text.schema, text.records, text.fences))
              .at(0);
      // A hot standby given as the primary: say so now rather than fail every claim.
      if (found.at(1).as<std::string>() == "on") throw PoolError(kReadOnly);
      const bool tables = found.at(0).as<bool>();
      if (!tables || !found.at(2).as<bool>()) {
        // Several processes may start at once: one creates, the others wait and find it done.
        exec("SELECT pg_advisory_xact_lock(7302585012475906)");
        if (!tables) {
          exec(text.create_schema_table);
          exec(text.create_records_table);
          exec(text.create_expiry_index);
        }
        // Transactional fences (tables of an earlier release lack it); CACHE 1, the default:
        // nextval() hands values out in call order.
        exec("CREATE SEQUENCE IF NOT EXISTS " + text.fences + " AS bigint CACHE 1");
        if (!tables) exec(text.insert_version);
      }
      const pqxx::result v = exec(text.select_version);
      const auto version = v.at(0).at(0).as<long long>();
      if (version != sql::kSchemaVersion) {
        throw PoolError(fmt::format("idem: table {} says schema version {}, this library knows {}",
                                    text.schema, version, sql::kSchemaVersion));
      }
      watched([&] { tx->commit(); });
    } catch (...) {
      try {
        watched([&] { tx->abort(); });  // ROLLBACK, under a deadline too
      } catch (...) {
        // The connection is gone: the server rolls back by itself.
      }
      throw;
    }
  }

  std::optional<sql::ClaimRow> claim(const sql::ClaimArgs& args) override {
    // A transactional claim opens its transaction: BEGIN, the lock that holds the key, and the
    // claim, which draws its fence from the sequence, in one message. The lock comes first:
    // an INSERT evaluates its VALUES (nextval()) before it waits for another transaction's
    // insert of the key, so without it a claim could draw before an earlier holder's.
    const bool transactional = work_ != nullptr;
    if (transactional && !work_->begun()) hold(records_, args.key);
    const char* name = transactional ? kClaimDrawn : kClaim;
    const pqxx::result r = watched([&] {
      return work_ && !work_->begun()
                 ? work_->open_with(execute(
                       name, {hex_bytea(args.key), std::to_string(as_i64(args.fingerprint.high)),
                              std::to_string(as_i64(args.fingerprint.low)),
                              std::to_string(args.min_fence), std::to_string(args.lease_ms),
                              std::to_string(args.keep_ms)}))
                 : run(name, bytes_param(args.key), as_i64(args.fingerprint.high),
                       as_i64(args.fingerprint.low), static_cast<std::int64_t>(args.min_fence),
                       args.lease_ms, args.keep_ms);
    });
    if (r.empty()) return std::nullopt;
    const auto row = r[0];
    sql::ClaimRow out;
    out.acquired = row[0].as<int>() == 1;
    out.fence = static_cast<Fence>(row[1].as<std::int64_t>());
    out.took_over = row[2].as<int>() != 0;
    if (!out.acquired) {
      out.state = static_cast<std::int16_t>(row[3].as<int>());
      out.fingerprint = {as_u64(row[4].as<std::int64_t>()), as_u64(row[5].as<std::int64_t>())};
      out.lease_left_ms = row[6].as<std::int64_t>();
      out.expire_left_ms = row[7].as<std::int64_t>();
      out.result = field_bytes(row[8]);
    }
    return out;
  }

  std::optional<sql::ClaimRow> read(std::string_view key) override {
    const pqxx::result r = watched([&] {
      pqxx::nontransaction tx(conn_);
      return pg::exec_prepared(tx, prepared(kRead), bytes_param(key));
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

  bool finish(const Ticket& ticket, sql::State state, std::string_view result,
              std::int64_t ttl_ms) override {
    return pg::affected_rows(run(kFinish, bytes_param(ticket.key),
                                 static_cast<std::int64_t>(ticket.fence), static_cast<int>(state),
                                 bytes_param(result), ttl_ms)) == 1;
  }

  bool release(const Ticket& ticket) override {
    return pg::affected_rows(run(kRelease, bytes_param(ticket.key),
                                 static_cast<std::int64_t>(ticket.fence))) == 1;
  }

  bool extend(const Ticket& ticket, std::int64_t lease_ms) override {
    return pg::affected_rows(run(kExtend, bytes_param(ticket.key),
                                 static_cast<std::int64_t>(ticket.fence), lease_ms)) == 1;
  }

  // Two statements: a deadline of two statement timeouts.
  std::size_t purge(std::size_t max_rows) override {
    return watched(
        [&] {
          pqxx::work tx(conn_);
          const pqxx::result gone = pg::exec_prepared(
              tx, prepared(kPurge),
              static_cast<std::int64_t>(std::min<std::size_t>(max_rows, INT64_MAX)));
          std::int64_t top = 0;
          for (const auto& row : gone) top = std::max(top, row[0].as<std::int64_t>());
          if (!gone.empty()) pg::exec_prepared(tx, prepared(kRaiseFloor), top);
          tx.commit();
          return gone.size();
        },
        2);
  }

  // Sends nothing: the settings and BEGIN go with the transaction's first statement.
  void begin(milliseconds block_for) override {
    // lock_timeout bounds the wait on the holder's row; zero would mean "forever" to PostgreSQL.
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

  // The advisory lock of (table, key): a 64-bit hash, so unrelated keys share a lock (and wait
  // for each other) with a chance of about one in 2^64 per pair.
  void hold(std::string_view table, std::string_view key) override {
    const std::uint64_t h =
        XXH3_64bits_withSeed(key.data(), key.size(), XXH3_64bits(table.data(), table.size()));
    work_->send_first(fmt::format("SELECT pg_advisory_xact_lock({})", as_i64(h)));
  }

  void commit() override {
    std::unique_ptr<PgTransaction> tx = std::move(work_);
    try {
      watched([&] { tx->commit_with(std::string(kNoLockTimeout) + "SELECT 1"); });
    } catch (...) {
      forget_timeouts();
      throw;
    }
  }

  // One round trip: the fenced finish, then COMMIT. The claim's lock_timeout (1 ms for a claim
  // that may not wait) bounded the wait on another holder; the finish must not fail on it, so it
  // runs without one (statement_timeout and the reply deadline still bound it).
  bool finish_and_commit(const Ticket& ticket, sql::State state, std::string_view result,
                         std::int64_t ttl_ms) override {
    std::unique_ptr<PgTransaction> tx = std::move(work_);
    try {
      watched([&] {
        tx->commit_with(std::string(kNoLockTimeout) + execute(
            kFinishHeld,
            {hex_bytea(ticket.key), std::to_string(static_cast<std::int64_t>(ticket.fence)),
             std::to_string(static_cast<int>(state)), hex_bytea(result), std::to_string(ttl_ms)}));
      });
    } catch (const pqxx::sql_error& e) {
      forget_timeouts();
      if (e.sqlstate() == "22P02" && std::string_view(e.what()).find(kNotHeld) != npos) {
        return false;  // rolled back
      }
      throw;
    } catch (...) {
      forget_timeouts();
      throw;
    }
    return true;
  }

  void rollback() noexcept override {
    std::unique_ptr<PgTransaction> tx = std::move(work_);
    if (!tx) return;
    forget_timeouts();  // settings sent in the transaction roll back with it
    try {
      watched([&] { tx->abort(); });
    } catch (...) {
      // A broken connection rolled back on the server already.
    }
  }

  void mark() override {
    watched([&] { work_->handle().exec("SAVEPOINT idem_handler"); });
  }
  void rollback_to_mark() override {
    watched([&] { work_->handle().exec("ROLLBACK TO SAVEPOINT idem_handler"); });
  }

  NativeTransaction native() noexcept override {
    if (!work_) return {};
    transaction_.transaction = &work_->handle();
    return NativeTransaction(transaction_);
  }

  std::int64_t run(const std::string& sql, std::span<const sql::Param> params) override {
    return static_cast<std::int64_t>(pg::affected_rows(generic(sql, params)));
  }

  bool first_row(const std::string& sql, std::span<const sql::Param> params, sql::Row& row,
                 unsigned blob_columns) override {
    const pqxx::result r = generic(sql, params);
    row.clear();
    if (r.empty()) return false;
    const auto first = r[0];
    for (int i = 0; i < static_cast<int>(first.size()); ++i) {
      const auto f = first[i];
      if (f.is_null()) {
        row.emplace_back(std::nullopt);
      } else if (i < 32 && (blob_columns >> i & 1u) != 0) {
        row.emplace_back(field_bytes(f));
      } else {
        row.emplace_back(std::string(f.c_str(), f.size()));
      }
    }
    return true;
  }

 private:
  // A generic statement, prepared on first use under a name of its own. Parameters go as text
  // (bytes in bytea's hex form), so that one dynamic list carries every kind.
  pqxx::result generic(const std::string& sql, std::span<const sql::Param> params) {
    return watched([&] { return generic_unwatched(sql, params); });
  }

  pqxx::result generic_unwatched(const std::string& sql, std::span<const sql::Param> params) {
    auto it = generic_.find(sql);
    if (it == generic_.end()) {
      std::string name = "idem_g" + std::to_string(generic_.size());
      declare(name, sql);
      it = generic_.emplace(sql, std::move(name)).first;
    }
    std::vector<std::string> values;
    values.reserve(params.size());
    for (const sql::Param& p : params) {
      switch (p.kind) {
        case sql::Param::integer:
          values.push_back(std::to_string(p.number));
          break;
        case sql::Param::text:
          values.emplace_back(p.string);
          break;
        case sql::Param::bytes:
          values.push_back(hex_bytea(p.string));
          break;
      }
    }
    if (work_ && !work_->begun()) return work_->open_with(execute(it->second, values));
    if (work_) return pg::exec_prepared_texts(work_->handle(), prepared(it->second), values);
    pqxx::nontransaction tx(conn_);
    return pg::exec_prepared_texts(tx, prepared(it->second), values);
  }

  template <class... Args>
  pqxx::result run(const char* name, Args&&... args) {
    return watched([&] {
      if (work_) {
        if (!work_->begun()) work_->open_with({});  // not after a claim: BEGIN on its own
        return pg::exec_prepared(work_->handle(), prepared(name), std::forward<Args>(args)...);
      }
      pqxx::nontransaction tx(conn_);
      return pg::exec_prepared(tx, prepared(name), std::forward<Args>(args)...);
    });
  }

  // A statement this session may run, prepared on the server at its first use (prepared()).
  void declare(const std::string& name, std::string text) {
    statements_.insert_or_assign(name, Statement{std::move(text), false});
  }

  // `name`, prepared on the server first if it is not yet (one round trip, the first time).
  const std::string& prepared(const std::string& name) {
    const auto it = statements_.find(name);
    if (it == statements_.end()) throw std::logic_error("idem: statement " + name + " unknown");
    if (!it->second.prepared) {
      pg::prepare(conn_, it->first, it->second.text);
      it->second.prepared = true;
    }
    return it->first;
  }

  // The longest statement timeout this session ever sent: the server enforces it (or a shorter
  // one) on every statement.
  milliseconds statement_limit() const noexcept {
    return std::max(statement_timeout_, limit_sent_);
  }

  // Runs `f`, round trips for the store, under a reply deadline: `statements` statement limits
  // plus kReplyMargin. When the watchdog had to shut the connection down, the failure is
  // NoReply (and a result that made it anyway is kept, but the connection is not reused).
  // Nested calls run under the outermost deadline.
  template <class F>
  auto watched(F&& f, int statements = 1) -> decltype(f()) {
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

  bool end_watch() noexcept {
    watching_ = false;
    return watch_.disarm();
  }

  // EXECUTE of a prepared statement as SQL text, for a message that carries other statements
  // too. The parameters are in their text forms, quoted as literals of unknown type: the
  // server reads them as it reads text parameters.
  std::string execute(const std::string& name, const std::vector<std::string>& values) {
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

  static std::string timeouts_text(milliseconds statement, milliseconds lock) {
    return fmt::format("SET statement_timeout = {}; SET lock_timeout = {}", statement.count(),
                       lock.count());
  }

  // Session settings, sent only when they change (one round trip).
  void set_timeouts(milliseconds statement, milliseconds lock) {
    if (statement == current_statement_ && lock == current_lock_) return;
    limit_sent_ = std::max(limit_sent_, statement);
    watched([&] {
      pqxx::nontransaction tx(conn_);
      tx.exec(timeouts_text(statement, lock));
    });
    current_statement_ = statement;
    current_lock_ = lock;
  }

  // The settings in force are unknown: the next transaction sends them again.
  void forget_timeouts() noexcept {
    current_statement_ = milliseconds{-1};
    current_lock_ = milliseconds{-1};
  }

  static constexpr auto npos = std::string_view::npos;

  pg::PgConnection conn_;
  pg::ReplyWatchdog::Watch watch_;  // after conn_: its duplicate socket closes first
  bool watching_ = false;           // a round trip is under a deadline (watched())
  std::string records_;             // the records table: the space of hold()'s key in a claim
  milliseconds statement_timeout_;
  milliseconds limit_sent_{0};
  milliseconds current_statement_{-1};
  milliseconds current_lock_{-1};
  std::unique_ptr<PgTransaction> work_;
  detail::PgTransactionHandle transaction_;  // what handlers get: work_'s transaction
  struct Statement {
    std::string text;
    bool prepared = false;  // on the server
  };
  std::unordered_map<std::string, Statement> statements_;  // by name
  std::unordered_map<std::string, std::string> generic_;   // statement text -> name
};

class PgBackend final : public sql::Backend {
 public:
  PgBackend(PostgresStoreOptions options, Role role)
      : options_(std::move(options)),
        role_(role),
        conninfo_(pg::with_network_defaults(options_.uri)),
        connect_budget_(pg::connect_budget(options_.uri, options_.connect_timeout)),
        text_(sql::kPostgres, options_.table_prefix) {}

  ~PgBackend() override = default;

  // Waits for a free connection up to `wait` or acquire_timeout, whichever is longer (a
  // transactional claim may wait its block_for).
  sql::Session* acquire(milliseconds wait) override {
    const milliseconds limit = std::max(wait, options_.acquire_timeout);
    const auto deadline = std::chrono::steady_clock::now() + limit;
    std::unique_lock lock(mutex_);
    for (;;) {
      while (!idle_.empty()) {
        std::unique_ptr<PgSession> s = std::move(idle_.back());
        idle_.pop_back();
        if (s->looks_alive()) return s.release();
        --open_;  // dropped: the server closed it
      }
      if (open_ < options_.pool_size) break;
      if (available_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() &&
          open_ >= options_.pool_size) {
        throw sql::PoolBusy(
            fmt::format("idem: postgres pool exhausted: all {} connections busy for {} ms",
                        options_.pool_size, limit.count()));
      }
    }
    ++open_;
    lock.unlock();
    try {
      return new PgSession(conninfo_, connect_budget_, text_, options_.statement_timeout, role_,
                           watchdog_);
    } catch (...) {
      lock.lock();
      --open_;
      available_.notify_one();
      throw;
    }
  }

  void release(sql::Session* session, bool broken) noexcept override {
    std::unique_ptr<PgSession> s(static_cast<PgSession*>(session));
    s->rollback();
    std::lock_guard lock(mutex_);
    if (broken || !s->is_open()) {
      --open_;
      s.reset();
    } else {
      idle_.push_back(std::move(s));
    }
    available_.notify_one();
  }

  void create_schema() override {
    sql::Session* s = acquire(milliseconds{0});
    bool broken = false;
    try {
      static_cast<PgSession*>(s)->create_schema(text_);
    } catch (...) {
      broken = !static_cast<PgSession*>(s)->is_open();
      release(s, broken);
      throw;
    }
    release(s, false);
  }

  Failure failure(std::exception_ptr error, bool& broken,
                  bool transactional_claim) const noexcept override {
    try {
      std::rethrow_exception(std::move(error));
    } catch (const NoReply& e) {
      broken = true;
      return make_failure(errc::store_unavailable, e.what());
    } catch (const pqxx::broken_connection& e) {
      broken = true;
      return unavailable("connection lost or refused", e.what());
    } catch (const pqxx::in_doubt_error& e) {
      broken = true;
      return unavailable("commit in doubt", e.what());
    } catch (const pqxx::sql_error& e) {
      const std::string& state = e.sqlstate();
      if (state == "55P03") {  // lock_not_available: lock_timeout ran out on the holder's row
        return make_failure(transactional_claim ? errc::in_progress : errc::store_unavailable,
                            fmt::format("idem: postgres: the key's row is locked by its holder "
                                        "({})",
                                        first_line(e.what())));
      }
      if (state.rfind("08", 0) == 0 || state.rfind("57P", 0) == 0) broken = true;
      if (state == "57014") return unavailable("statement timeout", e.what());
      if (state == "25006") {  // read_only_sql_transaction
        return make_failure(errc::store_unavailable,
                            fmt::format("{} ({})", kReadOnly, first_line(e.what())));
      }
      return unavailable(fmt::format("SQLSTATE {}", state), e.what());
    } catch (const PoolError& e) {
      return make_failure(errc::store_unavailable, e.what());
    } catch (const sql::PoolBusy& e) {
      return make_failure(errc::store_unavailable, e.what());
    } catch (const std::bad_alloc&) {
      return make_failure(errc::store_unavailable, "idem: postgres store: out of memory");
    } catch (const std::exception& e) {
      broken = true;
      return unavailable("error", e.what());
    } catch (...) {
      broken = true;
      return make_failure(errc::store_unavailable, "idem: postgres store: unknown error");
    }
  }

 private:
  static std::string first_line(const char* what) {
    std::string s(what);
    if (auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
    return s;
  }
  static Failure unavailable(std::string_view what, const char* detail) {
    return make_failure(errc::store_unavailable,
                        fmt::format("idem: postgres {}: {}", what, first_line(detail)));
  }

  PostgresStoreOptions options_;
  Role role_;
  std::string conninfo_;
  milliseconds connect_budget_;
  sql::Statements text_;
  pg::ReplyWatchdog watchdog_;  // before the sessions: they hold watches on it
  std::mutex mutex_;
  std::condition_variable available_;
  std::vector<std::unique_ptr<PgSession>> idle_;
  std::size_t open_ = 0;
};

PostgresStoreOptions checked(PostgresStoreOptions options) {
  if (options.uri.empty()) throw std::invalid_argument("idem::PostgresStore: uri is empty");
  if (options.pool_size == 0) throw std::invalid_argument("idem::PostgresStore: pool_size is 0");
  if (!sql::valid_prefix(options.table_prefix)) {
    throw std::invalid_argument("idem::PostgresStore: table_prefix '" + options.table_prefix +
                                "' must be letters, digits and '_' (not starting with a digit)");
  }
  if (!options.replica.uri.empty() && options.replica.pool_size == 0) {
    throw std::invalid_argument("idem::PostgresStore: replica.pool_size is 0");
  }
  return options;
}

// The checked options and, when they name a replica, its read path: a pool of its own on the
// same tables, with its own connection limits and timeouts.
std::pair<PostgresStoreOptions, std::shared_ptr<sql::ReplicaReads>> with_replica(
    PostgresStoreOptions options) {
  if (options.replica.uri.empty()) return {std::move(options), nullptr};
  const PostgresReplicaOptions& r = options.replica;
  PostgresStoreOptions pool{.uri = r.uri,
                            .mode = options.mode,
                            .table_prefix = options.table_prefix,
                            .pool_size = r.pool_size,
                            .acquire_timeout = r.acquire_timeout,
                            .connect_timeout = r.connect_timeout,
                            .statement_timeout = r.statement_timeout};
  auto reads = std::make_shared<sql::ReplicaReads>(
      std::make_unique<PgBackend>(std::move(pool), Role::replica), r.retry_after);
  return {std::move(options), std::move(reads)};
}

}  // namespace

std::unique_ptr<sql::Backend> sql::make_postgres_backend(const PostgresStoreOptions& options) {
  return std::make_unique<PgBackend>(checked(options), Role::primary);
}

PostgresStore::PostgresStore(PostgresStoreOptions options)
    : PostgresStore(with_replica(checked(std::move(options)))) {}

PostgresStore::PostgresStore(
    std::pair<PostgresStoreOptions, std::shared_ptr<sql::ReplicaReads>> parts)
    : SqlStore(std::make_unique<sql::Engine>(
          std::make_unique<PgBackend>(parts.first, Role::primary), parts.first.mode, parts.second)),
      replica_(std::move(parts.second)) {}

ReplicaCounters PostgresStore::replica_counters() const noexcept {
  return replica_ ? replica_->counters() : ReplicaCounters{};
}

}  // namespace idem
