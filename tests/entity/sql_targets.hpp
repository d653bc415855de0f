#pragma once
// The SQL targets of the entity store tests: the user's tables (orders, accounts) and a table of
// handler effects under a unique prefix; handlers write inside the claim's transaction.
//
// PostgreSQL reads IDEM_TEST_PG_URI: unset, its tests skip with a message; set but unreachable,
// they fail.

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include <pqxx/pqxx>

#include "entity/entity_common.hpp"
#include "idem/postgres/entities.hpp"
#include "idem/postgres/transaction.hpp"
#include "idem/sqlite/entities.hpp"
#include "idem/sqlite/transaction.hpp"

namespace idem::testing {

// ---- SQL targets
// ----------------------------------------------------------------------------------

/// What both SQL targets share: table names under a unique prefix.
struct SqlNames {
  std::string prefix = unique_name("e") + "_";  // the workers get theirs on the command line
  std::string orders() const { return prefix + "orders"; }
  std::string accounts() const { return prefix + "accounts"; }
  std::string effects() const { return prefix + "effects"; }
  std::string ddl() const {
    return "CREATE TABLE " + orders() + " (id TEXT PRIMARY KEY, state TEXT NOT NULL);" +
           "CREATE TABLE " + accounts() +
           " (id TEXT PRIMARY KEY, version BIGINT NOT NULL, balance BIGINT NOT NULL);" +
           "CREATE TABLE " + effects() + " (what TEXT NOT NULL);";
  }
};

/// The rows the cases make and read, through the target's own exec() and query() (a target
/// derives from SqlRows<itself>).
template <class Target>
class SqlRows {
 public:
  template <class Store>
  void create_order(Store&, const std::string& id) {
    self().exec("INSERT INTO " + names().orders() + " VALUES ('" + id + "', 'CREATED')");
  }
  template <class Store>
  void create_account(Store&, const std::string& id, long long balance) {
    self().exec("INSERT INTO " + names().accounts() + " VALUES ('" + id + "', 0, " +
                std::to_string(balance) + ")");
  }
  long long balance(const std::string& id) {
    return self().query("SELECT balance FROM " + names().accounts() + " WHERE id = '" + id + "'");
  }
  long long effects(const std::string& what) {
    return self().query("SELECT count(*) FROM " + names().effects() + " WHERE what = '" + what +
                        "'");
  }

 private:
  Target& self() { return static_cast<Target&>(*this); }
  const SqlNames& names() { return self().names(); }
};

class SqliteTarget : public SqlRows<SqliteTarget> {
 public:
  using Backend = SqliteBackend;
  static constexpr const char* kName = "sqlite";
  static constexpr bool kSql = true;

  SqliteTarget() : owned_(true) {
    dir_ = std::filesystem::temp_directory_path() / unique_name("idem_entity_test");
    std::filesystem::create_directories(dir_);
  }
  /// A worker's view of a test's file: `location` and `prefix` as the test made them.
  SqliteTarget(const std::string& location, const std::string& prefix)
      : dir_(std::filesystem::path(location).parent_path()) {
    names_.prefix = prefix;
  }
  ~SqliteTarget() {
    if (!owned_) return;
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  SqliteTarget(const SqliteTarget&) = delete;
  SqliteTarget& operator=(const SqliteTarget&) = delete;
  /// Creates the tables; false (with a reason in `why`) when the target is unavailable.
  bool set_up(std::string& /*why*/) {
    exec(names_.ddl());
    return true;
  }
  std::string location() const { return (dir_ / "entities.db").string(); }
  const SqlNames& names() const { return names_; }
  Backend::Options connection() const {
    return SqliteStoreOptions{.path = location(), .table_prefix = names_.prefix};
  }

  void exec(const std::string& sql) {
    SQLite::Database db(location(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE, 5000);
    db.exec(sql);
  }
  long long query(const std::string& sql) {
    SQLite::Database db(location(), SQLite::OPEN_READONLY, 5000);
    return db.execAndGet(sql).getInt64();
  }

  // In a handler, inside the claim's transaction.
  void add_effect(Context& ctx, const std::string& what) {
    SQLite::Statement st(sqlite_transaction(ctx),
                         "INSERT INTO " + names_.effects() + " (what) VALUES (?1)");
    st.bind(1, what);
    st.exec();
  }
  long long read_balance(Context& ctx, const std::string& id) {
    SQLite::Statement st(sqlite_transaction(ctx),
                         "SELECT balance FROM " + names_.accounts() + " WHERE id = ?1");
    st.bind(1, id);
    st.executeStep();
    return st.getColumn(0).getInt64();
  }
  void write_balance(Context& ctx, const std::string& id, long long value) {
    SQLite::Statement st(sqlite_transaction(ctx),
                         "UPDATE " + names_.accounts() + " SET balance = ?2 WHERE id = ?1");
    st.bind(1, id);
    st.bind(2, static_cast<std::int64_t>(value));
    st.exec();
  }

 private:
  bool owned_ = false;
  std::filesystem::path dir_;
  SqlNames names_;
};

class PostgresTarget : public SqlRows<PostgresTarget> {
 public:
  using Backend = PostgresBackend;
  static constexpr const char* kName = "postgres";
  static constexpr bool kSql = true;

  PostgresTarget() = default;
  /// A worker's view of a test's tables.
  PostgresTarget(const std::string& uri, const std::string& prefix) : uri_(uri), owned_(false) {
    names_.prefix = prefix;
  }
  PostgresTarget(const PostgresTarget&) = delete;
  PostgresTarget& operator=(const PostgresTarget&) = delete;

  bool set_up(std::string& why) {
    const auto uri = pg_uri();
    if (!uri) {
      why = kNoPgMessage;
      return false;
    }
    uri_ = *uri;
    exec(names_.ddl());  // throws when the server is unreachable: the test fails
    return true;
  }
  ~PostgresTarget() {
    if (uri_.empty() || !owned_) return;
    try {
      exec("DROP TABLE IF EXISTS " + names_.orders() + ", " + names_.accounts() + ", " +
           names_.effects() + ", " + names_.prefix + "entity_ops");
    } catch (...) {
    }
  }
  std::string location() const { return uri_; }
  const SqlNames& names() const { return names_; }
  Backend::Options connection() const {
    return PostgresStoreOptions{.connection = {.uri = uri_, .table_prefix = names_.prefix},
                                .pool = {.size = 10}};
  }

  void exec(const std::string& sql) {
    pqxx::connection c(uri_);
    pqxx::work w(c);
    w.exec(sql);
    w.commit();
  }
  long long query(const std::string& sql) {
    pqxx::connection c(uri_);
    pqxx::nontransaction n(c);
    return n.exec(sql)[0][0].as<long long>();
  }

  // Values quoted into the text: the same calls on libpqxx 6 and 7.
  void add_effect(Context& ctx, const std::string& what) {
    pqxx::dbtransaction& tx = pg_transaction(ctx);
    tx.exec("INSERT INTO " + names_.effects() + " (what) VALUES (" + tx.quote(what) + ")");
  }
  long long read_balance(Context& ctx, const std::string& id) {
    pqxx::dbtransaction& tx = pg_transaction(ctx);
    return tx.exec("SELECT balance FROM " + names_.accounts() + " WHERE id = " + tx.quote(id))[0][0]
        .as<long long>();
  }
  void write_balance(Context& ctx, const std::string& id, long long value) {
    pqxx::dbtransaction& tx = pg_transaction(ctx);
    tx.exec("UPDATE " + names_.accounts() + " SET balance = " + std::to_string(value) +
            " WHERE id = " + tx.quote(id));
  }

 private:
  std::string uri_;
  bool owned_ = true;
  SqlNames names_;
};

}  // namespace idem::testing
