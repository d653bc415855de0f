// SqliteStore: the SQL record strategy on SQLiteCpp, one connection per store taken in turn (one
// writer per file anyway). Writers of one process queue on file_writers.hpp's lock; processes
// wait through SQLite's busy handler (and retry_while_locked while opening).

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Exception.h>
#include <SQLiteCpp/Statement.h>
#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/connection_pool.hpp"
#include "idem/sqlite/store.hpp"
#include "idem/sqlite/transaction.hpp"
#include "sql/engine.hpp"
#include "sql/statements.hpp"
#include "sqlite/fence_file.hpp"
#include "sqlite/file_group.hpp"
#include "sqlite/file_waiters.hpp"
#include "sqlite/file_writers.hpp"
#include "sqlite/writers_lock.hpp"

namespace idem {

namespace {

using std::chrono::milliseconds;

constexpr char kEmpty = 0;  // a non-null pointer for empty blobs: a null one binds NULL

void bind_blob(SQLite::Statement& st, int index, std::string_view bytes) {
  st.bindNoCopy(index, bytes.empty() ? static_cast<const void*>(&kEmpty) : bytes.data(),
                static_cast<int>(bytes.size()));
}

std::string column_bytes(const SQLite::Column& column) {
  const int n = column.getBytes();
  const void* data = column.getBlob();
  if (n <= 0 || data == nullptr) return {};
  return std::string(static_cast<const char*>(data), static_cast<std::size_t>(n));
}

// The state of a read record. SQLite keeps whatever type was written and would coerce '1abc' or
// 1.5 into a state: a row with columns of other types than idem writes is malformed.
std::int16_t state_of(SQLite::Statement& read) {
  for (int i : {0, 1, 2, 3, 5}) {
    if (!read.getColumn(i).isInteger()) return sql::kMalformedState;
  }
  const SQLite::Column result = read.getColumn(6);
  if (!result.isBlob() && !result.isNull()) return sql::kMalformedState;
  const std::int64_t state = read.getColumn(0).getInt64();
  if (state == static_cast<std::int64_t>(sql::State::held) && !read.getColumn(4).isInteger()) {
    return sql::kMalformedState;  // a held record without a usable lease
  }
  return state >= 0 && state <= INT16_MAX ? static_cast<std::int16_t>(state) : sql::kMalformedState;
}

std::int64_t as_i64(std::uint64_t v) { return std::bit_cast<std::int64_t>(v); }
std::uint64_t as_u64(std::int64_t v) { return std::bit_cast<std::uint64_t>(v); }

class Prepared {  // a statement prepared once per connection
 public:
  Prepared(SQLite::Database& db, const std::string& text) : st_(db, text) {}
  SQLite::Statement& get() {
    st_.tryReset();
    st_.clearBindings();
    return st_;
  }

 private:
  SQLite::Statement st_;
};

using Clock = std::chrono::steady_clock;

int busy_ms(milliseconds wait) {
  return static_cast<int>(std::clamp<milliseconds::rep>(wait.count(), 0, INT32_MAX));
}

// Runs `step` (safe to run again) while SQLite answers "database is locked", until `deadline`:
// some steps of opening a file fail at once without calling the busy handler, above all `PRAGMA
// journal_mode = WAL` while another process opens or creates it.
template <class Step>
void retry_while_locked(SQLite::Database& db, milliseconds busy_timeout, Clock::time_point deadline,
                        Step&& step) {
  struct Restore {
    SQLite::Database& db;
    milliseconds busy_timeout;
    ~Restore() { (void)sqlite3_busy_timeout(db.getHandle(), busy_ms(busy_timeout)); }
  } restore{db, busy_timeout};
  milliseconds pause{1};
  for (;;) {
    db.setBusyTimeout(busy_ms(std::chrono::ceil<milliseconds>(deadline - Clock::now())));
    try {
      step();
      return;
    } catch (const SQLite::Exception& e) {
      const int code = e.getErrorCode() & 0xff;
      if ((code != SQLITE_BUSY && code != SQLITE_LOCKED) || Clock::now() + pause >= deadline) {
        throw;
      }
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, milliseconds{16});
  }
}

std::string main_file(SQLite::Database& db) {  // "" for an in-memory or temporary database
  const char* name = sqlite3_db_filename(db.getHandle(), "main");
  return name == nullptr ? std::string() : std::string(name);
}

// idem_next_fence(): a draw from the connection's fence file.
void next_fence(sqlite3_context* context, int /*argc*/, sqlite3_value** /*argv*/) {
  try {
    const std::uint64_t fence = static_cast<sql::FenceFile*>(sqlite3_user_data(context))->draw();
    sqlite3_result_int64(context, static_cast<sqlite3_int64>(fence));
  } catch (const std::exception& e) {
    sqlite3_result_error(context, e.what(), -1);
  }
}

struct SqliteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct SqliteBusy : SqliteError {  // no turn on the connection or the file in time
  using SqliteError::SqliteError;
};

class SqliteSession final : public sql::Session {
 public:
  SqliteSession(const SqliteStoreOptions& options, const sql::Statements& text,
                std::shared_ptr<sql::WritersLock> writers)
      : path_(options.path),
        busy_timeout_(options.busy_timeout),
        synchronous_full_(options.synchronous_full),
        writers_(std::move(writers)),
        db_(options.path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE, busy_ms(busy_timeout_)),
        fences_(main_file(db_)),
        text_(text) {
    // Not deterministic: each call draws. Direct only: no trigger or view calls it.
    const int rc = sqlite3_create_function_v2(db_.getHandle(), "idem_next_fence", 0,
                                              SQLITE_UTF8 | SQLITE_DIRECTONLY, &fences_,
                                              &next_fence, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) throw SQLite::Exception(db_.getHandle(), rc);
  }
  SqliteSession(const SqliteSession&) = delete;
  SqliteSession& operator=(const SqliteSession&) = delete;
  ~SqliteSession() override { rollback(); }

  void open() {
    const auto deadline = Clock::now() + busy_timeout_;
    retry_while_locked(db_, busy_timeout_, deadline, [&] {
      // WAL: readers beside the one writer, cheap commits (NORMAL: fsync at checkpoints only).
      db_.exec("PRAGMA journal_mode = WAL");
      db_.exec(synchronous_full_ ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
      if (!schema_present()) create_schema(deadline);
      prepare();
    });
  }

  std::optional<sql::ClaimRow> claim(const sql::ClaimArgs& args) override {
    // Transactional: begin()'s write lock holds the key; the upsert draws the fence.
    if (in_transaction_) return claim_in_open_transaction(args, *upsert_drawn_);
    return in_one_write(write_deadline(),
                        [&] { return claim_in_open_transaction(args, *upsert_); });
  }

  Written write_many(std::span<const sql::FinishArgs> finishes,
                     std::span<const sql::ClaimArgs> claims) override {
    return in_one_write(write_deadline(), [&] {
      Written out;
      out.finished.reserve(finishes.size());
      out.finish_errors.reserve(finishes.size());
      for (const sql::FinishArgs& a : finishes) {
        bool finished = false;
        out.finish_errors.push_back(alone(
            [&] { finished = finish_in_open_transaction(a.ticket, a.state, a.result, a.ttl_ms); }));
        out.finished.push_back(finished);
      }
      out.claimed.reserve(claims.size());
      out.claim_errors.reserve(claims.size());
      for (const sql::ClaimArgs& a : claims) {
        std::optional<sql::ClaimRow> row;
        out.claim_errors.push_back(alone([&] { row = claim_in_open_transaction(a, *upsert_); }));
        out.claimed.push_back(std::move(row));
      }
      return out;
    });
  }

  std::optional<sql::ClaimRow> read(std::string_view key) override {
    SQLite::Statement& rd = read_->get();
    bind_blob(rd, 1, key);
    if (!rd.executeStep()) return std::nullopt;
    sql::ClaimRow row;
    row.state = state_of(rd);
    row.fingerprint = {as_u64(rd.getColumn(1).getInt64()), as_u64(rd.getColumn(2).getInt64())};
    row.fence = static_cast<Fence>(rd.getColumn(3).getInt64());
    row.lease_left_ms = rd.getColumn(4).getInt64();
    row.expire_left_ms = rd.getColumn(5).getInt64();
    row.result = column_bytes(rd.getColumn(6));
    rd.tryReset();
    return row;
  }

  bool finish(const Ticket& ticket, sql::State state, std::string_view result,
              std::int64_t ttl_ms) override {
    const Writing writing(*this, write_deadline(), !in_transaction_);
    return finish_in_open_transaction(ticket, state, result, ttl_ms);
  }

  bool finish_in_open_transaction(const Ticket& ticket, sql::State state, std::string_view result,
                                  std::int64_t ttl_ms) {
    SQLite::Statement& st = finish_->get();
    bind_blob(st, 1, ticket.key);
    st.bind(2, static_cast<std::int64_t>(ticket.fence));
    st.bind(3, static_cast<int>(state));
    bind_blob(st, 4, result);
    st.bind(5, ttl_ms);
    return st.exec() == 1;
  }

  bool release(const Ticket& ticket) override {
    const Writing writing(*this, write_deadline(), !in_transaction_);
    SQLite::Statement& st = release_->get();
    bind_blob(st, 1, ticket.key);
    st.bind(2, static_cast<std::int64_t>(ticket.fence));
    return st.exec() == 1;
  }

  bool extend(const Ticket& ticket, std::int64_t lease_ms) override {
    const Writing writing(*this, write_deadline(), !in_transaction_);
    SQLite::Statement& st = extend_->get();
    bind_blob(st, 1, ticket.key);
    st.bind(2, static_cast<std::int64_t>(ticket.fence));
    st.bind(3, lease_ms);
    return st.exec() == 1;
  }

  std::size_t purge(std::size_t max_rows) override {
    return in_one_write(write_deadline(), [&] {
      SQLite::Statement& st = purge_->get();
      st.bind(1, static_cast<std::int64_t>(std::min<std::size_t>(max_rows, INT64_MAX)));
      std::size_t removed = 0;
      std::int64_t top = 0;
      while (st.executeStep()) {
        ++removed;
        top = std::max(top, st.getColumn(0).getInt64());
      }
      if (removed > 0) {
        SQLite::Statement& floor = raise_floor_->get();
        floor.bind(1, top);
        floor.exec();
      }
      return removed;
    });
  }

  void begin(milliseconds block_for) override {
    // Waits as long as the claim may block, at least busy_timeout; held until commit/rollback.
    take_writers(Clock::now() + std::max(block_for, busy_timeout_));
    try {
      db_.exec("BEGIN IMMEDIATE");
    } catch (...) {
      drop_writers();
      throw;
    }
    in_transaction_ = true;
  }

  // BEGIN IMMEDIATE took the write lock of the whole file: every key is held.
  void hold(std::string_view /*table*/, std::string_view /*key*/) override {}

  void commit() override {
    db_.exec("COMMIT");  // on failure the transaction stays open: the caller rolls back
    in_transaction_ = false;
    drop_writers();
  }

  void rollback() noexcept override {
    if (in_transaction_) {
      in_transaction_ = false;
      if (sqlite3_get_autocommit(db_.getHandle()) == 0) (void)db_.tryExec("ROLLBACK");
    }
    drop_writers();
  }

  void mark() override { db_.exec("SAVEPOINT idem_handler"); }
  void rollback_to_mark() override { db_.exec("ROLLBACK TO SAVEPOINT idem_handler"); }
  void step_savepoint() override { db_.exec("SAVEPOINT idem_step"); }
  void end_step(bool keep) override {
    db_.exec(keep ? "RELEASE SAVEPOINT idem_step"
                  : "ROLLBACK TO SAVEPOINT idem_step; RELEASE SAVEPOINT idem_step");
  }

  NativeTransaction native() noexcept override { return NativeTransaction(transaction_); }

  std::int64_t run(const std::string& sql, std::span<const sql::Param> params) override {
    const Writing writing(*this, write_deadline(), !in_transaction_);
    SQLite::Statement& st = generic(sql, params);
    const int changed = st.exec();
    st.tryReset();
    return changed;
  }

  bool first_row(const std::string& sql, std::span<const sql::Param> params, sql::Row& row,
                 unsigned /*blob_columns: SQLite hands back bytes either way*/) override {
    SQLite::Statement& st = generic(sql, params);
    row.clear();
    if (!st.executeStep()) return false;
    row = cells(st);
    st.tryReset();
    return true;
  }

  std::vector<sql::Row> rows(const std::string& sql, std::span<const sql::Param> params,
                             unsigned /*blob_columns*/) override {
    SQLite::Statement& st = generic(sql, params);
    std::vector<sql::Row> all;
    while (st.executeStep()) all.push_back(cells(st));
    st.tryReset();
    return all;
  }

 private:
  // This process's turn to write the file, outside the claim's transaction (`needed` false:
  // inside it, the turn is the session's already).
  class Writing {
   public:
    Writing(SqliteSession& session, Clock::time_point deadline, bool needed = true)
        : session_(needed ? &session : nullptr) {
      if (session_ != nullptr) session_->take_writers(deadline);
    }
    Writing(const Writing&) = delete;
    Writing& operator=(const Writing&) = delete;
    ~Writing() {
      if (session_ != nullptr) session_->drop_writers();
    }

   private:
    SqliteSession* session_;
  };

  template <class Body>
  auto in_one_write(Clock::time_point deadline, Body&& body) -> decltype(body()) {
    const Writing writing(*this, deadline);
    db_.exec("BEGIN IMMEDIATE");
    try {
      auto result = body();
      db_.exec("COMMIT");
      return result;
    } catch (...) {
      (void)db_.tryExec("ROLLBACK");
      throw;
    }
  }

  Clock::time_point write_deadline() const { return Clock::now() + busy_timeout_; }

  // One item of a batch in the open transaction under a savepoint of its own: an error rolls
  // back that item alone and is returned, and the batch goes on. An error that ended the whole
  // transaction (SQLite rolls back on a full disk, an I/O error, out of memory) is thrown.
  template <class Item>
  std::exception_ptr alone(Item&& item) {
    item_savepoint_->get().exec();
    try {
      item();
    } catch (...) {
      std::exception_ptr error = std::current_exception();
      if (sqlite3_get_autocommit(db_.getHandle()) != 0) throw;
      item_rollback_->get().exec();
      item_release_->get().exec();
      return error;
    }
    item_release_->get().exec();
    return nullptr;
  }

  // This process's writers in arrival order, then SQLite's busy handler, until `deadline`.
  void take_writers(Clock::time_point deadline) {
    const auto start = Clock::now();
    if (!writers_->lock_until(deadline)) {
      throw SqliteBusy(
          fmt::format("idem: sqlite {} busy: other writers of this process kept it for {} ms (in "
                      "transactional mode, a handler)",
                      path_, std::chrono::ceil<milliseconds>(deadline - start).count()));
    }
    holds_writers_ = true;
    db_.setBusyTimeout(busy_ms(std::chrono::ceil<milliseconds>(deadline - Clock::now())));
  }

  void drop_writers() noexcept {
    if (!holds_writers_) return;
    holds_writers_ = false;
    writers_->unlock();
    (void)sqlite3_busy_timeout(db_.getHandle(), busy_ms(busy_timeout_));
  }

  static sql::Row cells(SQLite::Statement& st) {  // integers as decimal text
    sql::Row row;
    for (int i = 0; i < st.getColumnCount(); ++i) {
      const SQLite::Column c = st.getColumn(i);
      if (c.isNull()) {
        row.emplace_back(std::nullopt);
      } else if (c.isInteger()) {
        row.emplace_back(std::to_string(c.getInt64()));
      } else {
        row.emplace_back(column_bytes(c));
      }
    }
    return row;
  }

  SQLite::Statement& generic(const std::string& sql, std::span<const sql::Param> params) {
    auto it = generic_.find(sql);
    if (it == generic_.end())
      it = generic_.emplace(sql, std::make_unique<Prepared>(db_, sql)).first;
    SQLite::Statement& st = it->second->get();
    int index = 1;
    for (const sql::Param& p : params) {
      switch (p.kind) {
        case sql::Param::integer:
          st.bind(index, p.number);
          break;
        case sql::Param::text:
          st.bind(index, std::string(p.string));
          break;
        case sql::Param::bytes:
          bind_blob(st, index, p.string);
          break;
      }
      ++index;
    }
    return st;
  }

  std::optional<sql::ClaimRow> claim_in_open_transaction(const sql::ClaimArgs& args,
                                                         Prepared& upsert) {
    SQLite::Statement& up = upsert.get();
    bind_blob(up, 1, args.key);
    up.bind(2, as_i64(args.fingerprint.high));
    up.bind(3, as_i64(args.fingerprint.low));
    up.bind(4, static_cast<std::int64_t>(args.min_fence));
    up.bind(5, args.lease_ms);
    up.bind(6, args.keep_ms);
    if (up.executeStep()) {
      sql::ClaimRow row;
      // A fence past INT64_MAX turns real in SQLite: the record is malformed, not acquired.
      row.acquired = up.getColumn(0).isInteger();
      if (!row.acquired) row.state = sql::kMalformedState;
      row.fence = static_cast<Fence>(up.getColumn(0).getInt64());
      row.took_over = up.getColumn(1).getInt() != 0;
      up.tryReset();
      return row;
    }
    return read(args.key);
  }

  // Whether the whole schema exists (throws SqliteError for another version). Reads only, which
  // in WAL mode wait for no writer, such as a transactional handler.
  bool schema_present() {
    std::vector<const std::string*> names{&text_.schema, &text_.records, &expiry_index_,
                                          &text_.steps, &text_.entity_ops};
    for (const std::string& trigger : text_.step_triggers) names.push_back(&trigger);
    std::string list;
    for (std::size_t i = 1; i <= names.size(); ++i)
      list += (i > 1 ? ", ?" : "?") + std::to_string(i);
    SQLite::Statement objects(db_,
                              "SELECT count(*) FROM sqlite_master WHERE name IN (" + list + ")");
    for (std::size_t i = 0; i < names.size(); ++i) {
      objects.bind(static_cast<int>(i) + 1, *names[i]);
    }
    if (!objects.executeStep() || objects.getColumn(0).getInt64() != std::ssize(names)) {
      return false;
    }
    return check_version();
  }

  // Creates what is missing under the write lock, which orders two processes creating at once.
  void create_schema(Clock::time_point deadline) {
    in_one_write(deadline, [&] {
      for (const std::string& ddl : text_.schema_ddl) db_.exec(ddl);
      return check_version();
    });
  }

  // False when the schema table holds no version yet, or an earlier one.
  bool check_version() {
    SQLite::Statement version(db_, text_.select_version);
    if (!version.executeStep() || version.getColumn(0).isNull()) return false;
    const auto v = version.getColumn(0).getInt64();
    if (v >= 1 && v < text_.version) return false;
    if (v != text_.version) {
      throw SqliteError(
          fmt::format("idem: table {} says schema version {}, this library knows version {}",
                      text_.schema, v, text_.version));
    }
    return true;
  }

  void prepare() {
    upsert_.emplace(db_, text_.upsert);
    upsert_drawn_.emplace(db_, text_.upsert_drawn);
    read_.emplace(db_, text_.read);
    finish_.emplace(db_, text_.finish);
    release_.emplace(db_, text_.release);
    extend_.emplace(db_, text_.extend);
    purge_.emplace(db_, text_.purge);
    raise_floor_.emplace(db_, text_.raise_floor);
    item_savepoint_.emplace(db_, "SAVEPOINT idem_item");
    item_rollback_.emplace(db_, "ROLLBACK TO SAVEPOINT idem_item");
    item_release_.emplace(db_, "RELEASE SAVEPOINT idem_item");
  }

  std::string path_;
  milliseconds busy_timeout_;
  bool synchronous_full_;
  std::shared_ptr<sql::WritersLock> writers_;  // this process's writers of the file
  bool holds_writers_ = false;
  SQLite::Database db_;
  detail::SqliteTransactionHandle transaction_{db_};  // what handlers get: this connection
  sql::FenceFile fences_;  // transactional fences: idem_next_fence() draws from it
  const sql::Statements& text_;
  const std::string expiry_index_ = text_.records + "_expires_at";
  bool in_transaction_ = false;
  std::optional<Prepared> upsert_, upsert_drawn_, read_, finish_, release_, extend_, purge_,
      raise_floor_, item_savepoint_, item_rollback_, item_release_;
  std::unordered_map<std::string, std::unique_ptr<Prepared>> generic_;
};

class SqliteBackend final : public sql::Backend {
 public:
  explicit SqliteBackend(SqliteStoreOptions options)
      : options_(std::move(options)),
        text_(sql::kSqlite, options_.table_prefix),
        writers_(sql::file_writers(options_.path)),
        pool_(detail::PoolOptions{.max_open = 1, .fair_after = sql::WritersLock::kFairAfter},
              [this](Clock::time_point) -> SessionPool::Handle {
                auto session = std::make_unique<SqliteSession>(options_, text_, writers_);
                session->open();
                return session;
              }) {}

  sql::SessionLease acquire(milliseconds wait) override {
    const auto limit = std::max(wait, options_.busy_timeout);
    try {
      return pool_.acquire(Clock::now() + limit);
    } catch (const detail::PoolExhausted&) {
      throw SqliteBusy(fmt::format(
          "idem: sqlite store busy: no turn on {} within {} ms (another call holds its connection; "
          "in transactional mode, a handler)",
          options_.path, limit.count()));
    }
  }

  void create_schema() override {
    (void)acquire(milliseconds{0});  // opening the session creates the schema
  }

  const sql::Statements& statements() const noexcept override { return text_; }
  std::string_view store_name() const noexcept override { return SqliteStore::kStoreName; }
  PoolStats pool_stats() const noexcept override { return pool_.stats(); }

  // A locked file is store_unavailable, for a transactional claim too: the lock is the file's,
  // not the key's.
  Failure failure(std::exception_ptr error, bool& broken,
                  bool /*transactional_claim*/) const noexcept override {
    try {
      std::rethrow_exception(std::move(error));
    } catch (const SQLite::Exception& e) {
      const int code = e.getErrorCode();
      if (code == SQLITE_BUSY || code == SQLITE_LOCKED) {
        return make_failure(errc::store_unavailable,
                            fmt::format("idem: sqlite {} is locked by another writer: {}",
                                        options_.path, e.what()));
      }
      if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB || code == SQLITE_CANTOPEN ||
          code == SQLITE_IOERR) {
        broken = true;  // reopen on next use
      }
      return make_failure(errc::store_unavailable,
                          fmt::format("idem: sqlite {}: {} (code {})", options_.path, e.what(),
                                      e.getExtendedErrorCode()));
    } catch (const SqliteError& e) {  // SqliteBusy too
      return make_failure(errc::store_unavailable, e.what());
    } catch (const std::bad_alloc&) {
      return make_failure(errc::store_unavailable, "idem: sqlite store: out of memory");
    } catch (const std::exception& e) {
      broken = true;
      return make_failure(errc::store_unavailable, fmt::format("idem: sqlite store: {}", e.what()));
    } catch (...) {
      broken = true;
      return make_failure(errc::store_unavailable, "idem: sqlite store: unknown error");
    }
  }

 private:
  using SessionPool = sql::SessionPool;

  SqliteStoreOptions options_;
  sql::Statements text_;
  std::shared_ptr<sql::WritersLock> writers_;  // the file's, shared with the process's other stores
  SessionPool pool_;                           // last: its session uses the members above
};

SqliteStoreOptions checked(SqliteStoreOptions options) {
  if (options.path.empty()) throw std::invalid_argument("idem::SqliteStore: path is empty");
  if (!sql::valid_prefix(options.table_prefix)) {
    throw std::invalid_argument("idem::SqliteStore: table_prefix '" + options.table_prefix +
                                "' must be letters, digits and '_' (not starting with a digit)");
  }
  if (options.busy_timeout.count() < 0) options.busy_timeout = milliseconds{0};
  return options;
}

std::unique_ptr<sql::Engine> sqlite_engine(SqliteStoreOptions options) {
  const auto mode = options.mode;
  return std::make_unique<sql::Engine>(std::make_unique<SqliteBackend>(checked(std::move(options))),
                                       mode);
}

}  // namespace

std::unique_ptr<sql::Backend> sql::make_sqlite_backend(const SqliteStoreOptions& options) {
  return std::make_unique<SqliteBackend>(checked(options));
}

SqliteStore::SqliteStore(SqliteStoreOptions options)
    : SqliteStore(sql::file_waiters(options.path), sql::file_group(checked(options)),
                  std::move(options)) {}

SqliteStore::SqliteStore(std::shared_ptr<sql::FileWaiters> waiters,
                         std::shared_ptr<sql::FileGroup> group, SqliteStoreOptions&& options)
    : SqlStore(sqlite_engine(std::move(options))),
      waiters_(std::move(waiters)),
      group_(std::move(group)) {}

namespace {

// The last claim of this thread that answered in_progress, with its key's wake generation read
// before the claim: await_change() right after it waits from there, so a hold that ended in
// between is not missed. The engine claims and waits on one thread.
struct LastBusy {
  const sql::FileWaiters* waiters = nullptr;
  std::size_t key = 0;  // the key's hash
  Fence fence = 0;
  sql::FileWaiters::Generation seen = 0;
};
thread_local LastBusy last_busy;

std::size_t key_hash(std::string_view key) noexcept { return std::hash<std::string_view>{}(key); }

}  // namespace

// Lease mode: through the file's group, written by whichever caller's turn it is (its store's
// engine), one write transaction for the calls queued behind it.
Result<Claim> SqliteStore::grouped_claim(const ClaimRequest& request) {
  if (!group_ || engine() == nullptr) return SqlStore::claim(request);
  if (request.after_wait) {
    // Read before queueing for the file's writer: a settled record needs no write transaction.
    if (auto answer = engine()->settled_answer(request)) return std::move(*answer);
  }
  ClaimRequest grouped = request;
  grouped.after_wait = false;  // read above, not again inside the group's transaction
  const sql::WritingEngine::Scope writing(*engine());
  return group_->calls.claim(grouped);
}

Status SqliteStore::grouped_commit(const Ticket& ticket, const Completion& completion) {
  if (!group_ || engine() == nullptr) return SqlStore::commit(ticket, completion);
  const sql::WritingEngine::Scope writing(*engine());
  return group_->calls.commit(ticket, completion);
}

Result<Claim> SqliteStore::claim(const ClaimRequest& request) {
  if (!waiters_) return SqlStore::claim(request);  // moved from: SqlStore answers
  const sql::FileWaiters::Generation seen = waiters_->generation(request.key);
  Result<Claim> claimed = grouped_claim(request);
  if (!claimed) return claimed;
  if (claimed->status == ClaimStatus::in_progress) {
    last_busy = LastBusy{waiters_.get(), key_hash(request.key), claimed->fence, seen};
  } else if (claimed->took_over) {
    waiters_->ended(request.key);
  }
  return claimed;
}

Status SqliteStore::commit(const Ticket& ticket, const Completion& completion) {
  Status committed = grouped_commit(ticket, completion);
  if (committed && waiters_) waiters_->ended(ticket.key);
  return committed;
}

Status SqliteStore::abort(const Ticket& ticket) {
  Status aborted = SqlStore::abort(ticket);
  if (aborted && waiters_) waiters_->ended(ticket.key);
  return aborted;
}

std::vector<Result<Claim>> SqliteStore::claim_batch(std::span<const ClaimRequest> requests) {
  std::vector<Result<Claim>> claimed = SqlStore::claim_batch(requests);
  for (std::size_t i = 0; waiters_ && i < claimed.size() && i < requests.size(); ++i) {
    if (claimed[i] && claimed[i]->took_over) waiters_->ended(requests[i].key);
  }
  return claimed;
}

std::vector<Status> SqliteStore::commit_batch(std::span<const CommitRequest> requests) {
  std::vector<Status> committed = SqlStore::commit_batch(requests);
  for (std::size_t i = 0; waiters_ && i < committed.size() && i < requests.size(); ++i) {
    if (committed[i]) waiters_->ended(requests[i].ticket.key);
  }
  return committed;
}

GroupAnswers SqliteStore::write_group(std::span<const CommitRequest> commits,
                                      std::span<const ClaimRequest> claims) {
  GroupAnswers answers = SqlStore::write_group(commits, claims);
  for (std::size_t i = 0; waiters_ && i < answers.commits.size() && i < commits.size(); ++i) {
    if (answers.commits[i]) waiters_->ended(commits[i].ticket.key);
  }
  for (std::size_t i = 0; waiters_ && i < answers.claims.size() && i < claims.size(); ++i) {
    if (answers.claims[i] && answers.claims[i]->took_over) waiters_->ended(claims[i].key);
  }
  return answers;
}

StoreStats SqliteStore::stats() const noexcept {
  StoreStats s = SqlStore::stats();
  if (group_) {
    s.group = GroupStats{.groups = group_->calls.groups(), .calls = group_->calls.grouped_calls()};
  }
  return s;
}

void SqliteStore::await_change(const Ticket& held, std::chrono::milliseconds bound) {
  if (!waiters_ || bound.count() <= 0) return;
  const auto deadline = std::chrono::steady_clock::now() + bound;
  sql::FileWaiters::Generation seen = waiters_->generation(held.key);
  const LastBusy busy = std::exchange(last_busy, LastBusy{});
  if (busy.waiters == waiters_.get() && busy.key == key_hash(held.key) &&
      busy.fence == held.fence) {
    seen = busy.seen;
  }
  waiters_->wait(held.key, seen, deadline);
}

}  // namespace idem
