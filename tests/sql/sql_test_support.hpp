#pragma once
// Shared helpers of the SQL store tests: where the databases are, fresh stores on them, and a
// business table that transactional handlers write to.
//
// PostgreSQL tests read IDEM_TEST_PG_URI (scripts/test starts a throwaway server and sets it).
// Unset: they skip with a message. Set but unreachable: they fail.

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <string>

#include "idem/idem.hpp"
#include "idem/postgres/store.hpp"
#include "idem/postgres/transaction.hpp"
#include "idem/sqlite/store.hpp"
#include "idem/sqlite/transaction.hpp"
#include "support/pg_env.hpp"
#include "support/unique_name.hpp"

namespace idem::testing {

enum class Backend { sqlite, postgres };

inline const char* name_of(Backend b) { return b == Backend::sqlite ? "sqlite" : "postgres"; }
inline const char* name_of(SqlMode m) { return m == SqlMode::lease ? "lease" : "transactional"; }

/// The environment variable `name`, or "" when unset.
inline std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// Stops (fast) or starts a throwaway server of scripts/lib/servers.sh with pg_ctl from
/// IDEM_TEST_PG_BIN, as IDEM_TEST_PG_USER when set; returns pg_ctl's exit status.
inline int pg_ctl(const std::string& data, bool stop, const std::string& log = "",
                  const std::string& opts = "") {
  std::string cmd;
  if (const std::string user = env_or_empty("IDEM_TEST_PG_USER"); !user.empty()) {
    cmd = "runuser -u " + shell_quote(user) + " -- ";
  }
  cmd += shell_quote(env_or_empty("IDEM_TEST_PG_BIN") + "/pg_ctl") + " -D " + shell_quote(data) +
         " -w -t 30 ";
  cmd += stop ? "-m fast stop" : "-l " + shell_quote(log) + " -o " + shell_quote(opts) + " start";
  return std::system((cmd + " >/dev/null 2>&1").c_str());
}

/// A fresh SQLite file in a temp folder, removed with the object.
class TempDb {
 public:
  TempDb() {
    dir_ = std::filesystem::temp_directory_path() / unique_name("idem_sql_test");
    std::filesystem::create_directories(dir_);
  }
  ~TempDb() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::string path() const { return (dir_ / "idem.db").string(); }

 private:
  std::filesystem::path dir_;
};

/// Where one test's records live: a SQLite file or a PostgreSQL prefix.
struct Target {
  Backend backend = Backend::sqlite;
  std::string location;  // file path or URI
  std::string prefix;    // table prefix
};

inline std::unique_ptr<SqlStore> make_store(const Target& t, SqlMode mode,
                                            std::size_t pool_size = 8) {
  if (t.backend == Backend::sqlite) {
    return std::make_unique<SqliteStore>(
        SqliteStoreOptions{.path = t.location, .mode = mode, .table_prefix = t.prefix});
  }
  return std::make_unique<PostgresStore>(
      PostgresStoreOptions{.connection = {.uri = t.location, .table_prefix = t.prefix},
                           .mode = mode,
                           .pool = {.size = pool_size}});
}

/// The business table a transactional handler writes to: (key text, note text).
inline std::string business_table(const Target& t) { return t.prefix + "orders"; }

/// Runs one statement on a connection of its own (outside the store); `sqlite_flags` open the
/// SQLite file.
inline void exec_directly(const Target& t, const std::string& sql,
                          int sqlite_flags = SQLite::OPEN_READWRITE) {
  if (t.backend == Backend::sqlite) {
    SQLite::Database db(t.location, sqlite_flags, 5000);
    db.exec(sql);
  } else {
    pqxx::connection c(t.location);
    pqxx::work w(c);
    w.exec(sql);
    w.commit();
  }
}

inline void create_business_table(const Target& t) {
  exec_directly(
      t, "CREATE TABLE IF NOT EXISTS " + business_table(t) + " (key TEXT NOT NULL, note TEXT)",
      SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
}

/// Inserts a business row inside the handler's transaction.
// Runs a statement that fails inside the claim's transaction (PostgreSQL: leaves it aborted).
inline void run_failing_statement(const Target& t, Context& ctx) {
  const std::string sql = "INSERT INTO idem_no_such_table (x) VALUES (1)";
  if (t.backend == Backend::sqlite) {
    sqlite_transaction(ctx).exec(sql);
  } else {
    pg_transaction(ctx).exec(sql);
  }
}

inline void insert_business_row(const Target& t, Context& ctx, const std::string& key,
                                const std::string& note) {
  const std::string sql = "INSERT INTO " + business_table(t) + " (key, note) VALUES ";
  if (t.backend == Backend::sqlite) {
    SQLite::Statement st(sqlite_transaction(ctx), sql + "(?1, ?2)");
    st.bind(1, key);
    st.bind(2, note);
    st.exec();
  } else {
    pqxx::dbtransaction& w = pg_transaction(ctx);
    w.exec(sql + "(" + w.quote(key) + ", " + w.quote(note) + ")");
  }
}

/// Business rows for `key`, read on a connection of its own.
inline long long count_business_rows(const Target& t, const std::string& key) {
  const std::string sql = "SELECT count(*) FROM " + business_table(t) + " WHERE key = ";
  if (t.backend == Backend::sqlite) {
    SQLite::Database db(t.location, SQLite::OPEN_READONLY, 5000);
    SQLite::Statement st(db, sql + "?1");
    st.bind(1, key);
    st.executeStep();
    return st.getColumn(0).getInt64();
  }
  pqxx::connection c(t.location);
  pqxx::nontransaction n(c);
  return n.exec(sql + n.quote(key))[0][0].as<long long>();
}

/// Records stored in the target's table (any state), read on a connection of its own.
inline long long count_records(const Target& t) {
  const std::string sql = "SELECT count(*) FROM " + t.prefix + "records";
  if (t.backend == Backend::sqlite) {
    SQLite::Database db(t.location, SQLite::OPEN_READONLY, 5000);
    return db.execAndGet(sql).getInt64();
  }
  pqxx::connection c(t.location);
  pqxx::nontransaction n(c);
  return n.exec(sql)[0][0].as<long long>();
}

}  // namespace idem::testing
