// The schema a store creates is the one share/idem/schema-*.sql ships: a database a store made
// and one made from the file have the same tables, columns, indexes, triggers, functions,
// sequences and version row. `idem schema check` says a version 1 database is outdated, and
// `idem schema migrate`, or a store that opens it, upgrades it to that same schema.

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "idem/sqlite/store.hpp"
#ifdef IDEM_TEST_WITH_POSTGRES
#include <pqxx/pqxx>

#include "idem/postgres/store.hpp"
#endif

namespace idem::testing {
namespace {

// The version 1 schema as the release before the steps shipped it (share/idem then).
constexpr const char* kSqliteVersion1 =
    "CREATE TABLE IF NOT EXISTS idem_schema (version INTEGER NOT NULL, fence_floor INTEGER NOT "
    "NULL DEFAULT 0);"
    "CREATE TABLE IF NOT EXISTS idem_records (key BLOB PRIMARY KEY, state INTEGER NOT NULL, fp_hi "
    "INTEGER NOT NULL, fp_lo INTEGER NOT NULL, fence INTEGER NOT NULL, took_over INTEGER NOT NULL "
    "DEFAULT 0, lease_until INTEGER NOT NULL, expires_at INTEGER NOT NULL, result BLOB) WITHOUT "
    "ROWID;"
    "CREATE INDEX IF NOT EXISTS idem_records_expires_at ON idem_records (expires_at);"
    "INSERT INTO idem_schema (version) SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM idem_schema);";

using Dump = std::vector<std::string>;

// Every object of a SQLite file as sqlite_master has it, and the version row.
Dump sqlite_dump(const std::string& path) {
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  Dump out;
  SQLite::Statement objects(
      db,
      "SELECT type || ' ' || name || ' ON ' || tbl_name || ': ' || coalesce(sql, '') FROM "
      "sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name");
  while (objects.executeStep()) out.push_back(objects.getColumn(0).getString());
  SQLite::Statement version(db, "SELECT version, fence_floor FROM idem_schema");
  while (version.executeStep()) {
    out.push_back("version " + version.getColumn(0).getString() + " floor " +
                  version.getColumn(1).getString());
  }
  return out;
}

class SqliteFile {
 public:
  explicit SqliteFile(const std::string& what)
      : path_("/tmp/idem_schema_test_" + std::to_string(::getpid()) + "_" + what + ".db") {
    remove();
  }
  ~SqliteFile() { remove(); }
  SqliteFile(const SqliteFile&) = delete;
  SqliteFile& operator=(const SqliteFile&) = delete;
  const std::string& path() const { return path_; }
  void exec(const std::string& sql) const {
    SQLite::Database(path_, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE).exec(sql);
  }

 private:
  void remove() {
    for (const char* suffix : {"", "-wal", "-shm", "-fences"}) {
      std::filesystem::remove(path_ + suffix);
    }
  }
  std::string path_;
};

Dump sqlite_store_dump() {
  SqliteFile made("store");
  SqliteStore store{SqliteStoreOptions{.path = made.path()}};
  const Status ready = store.ensure_schema();
  EXPECT_TRUE(ready.ok()) << ready.failure().describe();
  return sqlite_dump(made.path());
}

TEST(SchemaFiles, SqliteStoreCreatesTheShippedSchema) {
  SqliteFile shipped("shipped");
  shipped.exec(slurp(IDEM_SHARE_DIR "/schema-sqlite.sql"));
  const Dump expected = sqlite_store_dump();
  EXPECT_EQ(sqlite_dump(shipped.path()), expected);
  // A store opening a file made from the shipped schema finds it complete and current.
  SqliteStore store{SqliteStoreOptions{.path = shipped.path()}};
  ASSERT_TRUE(store.ensure_schema().ok());
  EXPECT_EQ(sqlite_dump(shipped.path()), expected);
  CliRun check = idem_cli("--store sqlite:" + shipped.path() + " schema check");
  EXPECT_EQ(check.status, 0) << check.out << check.err;
}

TEST(SchemaFiles, SqliteVersionOneIsOutdatedAndMigrateOrAStoreUpgradesIt) {
  const Dump expected = sqlite_store_dump();
  SqliteFile old("v1");
  old.exec(kSqliteVersion1);
  CliRun check = idem_cli("--store sqlite:" + old.path() + " schema check");
  EXPECT_EQ(check.status, 4) << check.out << check.err;
  EXPECT_NE(check.out.find("version 1 (this library: 2)"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("idem schema migrate"), std::string::npos) << check.out;
  CliRun migrate = idem_cli("--store sqlite:" + old.path() + " schema migrate");
  EXPECT_EQ(migrate.status, 0) << migrate.out << migrate.err;
  EXPECT_EQ(sqlite_dump(old.path()), expected);
  EXPECT_EQ(idem_cli("--store sqlite:" + old.path() + " schema check").status, 0);

  SqliteFile opened("v1_opened");
  opened.exec(kSqliteVersion1);
  SqliteStore store{SqliteStoreOptions{.path = opened.path()}};
  const Status ready = store.ensure_schema();
  ASSERT_TRUE(ready.ok()) << ready.failure().describe();
  EXPECT_EQ(sqlite_dump(opened.path()), expected);
}

#ifdef IDEM_TEST_WITH_POSTGRES

constexpr const char* kPostgresVersion1 =
    "CREATE TABLE IF NOT EXISTS idem_schema (version bigint NOT NULL, fence_floor bigint NOT NULL "
    "DEFAULT 0);"
    "CREATE TABLE IF NOT EXISTS idem_records (key bytea PRIMARY KEY, state smallint NOT NULL, "
    "fp_hi bigint NOT NULL, fp_lo bigint NOT NULL, fence bigint NOT NULL, took_over smallint NOT "
    "NULL DEFAULT 0, lease_until bigint NOT NULL, expires_at bigint NOT NULL, result bytea);"
    "CREATE INDEX IF NOT EXISTS idem_records_expires_at ON idem_records (expires_at);"
    "CREATE SEQUENCE IF NOT EXISTS idem_fences AS bigint CACHE 1;"
    "INSERT INTO idem_schema (version) SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM idem_schema);";

std::string pg_base_uri() {
  const char* uri = std::getenv("IDEM_TEST_PG_URI");
  return uri == nullptr ? std::string() : std::string(uri);
}

// A PostgreSQL schema of the test's own (dropped with the object); its URI makes it the only
// one a connection sees, so that the default prefix idem_ meets no other test's tables.
class PgNamespace {
 public:
  explicit PgNamespace(const std::string& what)
      : name_("idem_schema_test_" + std::to_string(::getpid()) + "_" + what) {
    exec("DROP SCHEMA IF EXISTS " + name_ + " CASCADE; CREATE SCHEMA " + name_);
  }
  ~PgNamespace() {
    try {
      exec("DROP SCHEMA IF EXISTS " + name_ + " CASCADE");
    } catch (...) {
    }
  }
  PgNamespace(const PgNamespace&) = delete;
  PgNamespace& operator=(const PgNamespace&) = delete;

  std::string uri() const {
    const std::string base = pg_base_uri();
    return base + (base.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" +
           name_;
  }
  void exec(const std::string& sql) const {
    pqxx::connection c(pg_base_uri());
    pqxx::nontransaction tx(c);
    tx.exec("SET search_path = " + name_);
    tx.exec(sql);
  }

  // Every object of the namespace, its own name replaced by "ns", and the version row.
  Dump dump() const {
    pqxx::connection c(pg_base_uri());
    pqxx::nontransaction tx(c);
    const std::string ns = tx.quote(name_);
    Dump out;
    auto add = [&](const std::string& sql) {
      for (const auto& row : tx.exec(sql)) {
        std::string line = row[0].c_str();
        for (std::size_t at; (at = line.find(name_)) != std::string::npos;) {
          line.replace(at, name_.size(), "ns");
        }
        out.push_back(line);
      }
    };
    add("SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || "
        "' ' || coalesce(column_default, '') || ' #' || ordinal_position FROM "
        "information_schema.columns WHERE table_schema = " +
        ns + " ORDER BY table_name, ordinal_position");
    add("SELECT indexdef FROM pg_indexes WHERE schemaname = " + ns + " ORDER BY indexname");
    add("SELECT sequence_name || ' ' || data_type || ' ' || start_value || ' ' || increment FROM "
        "information_schema.sequences WHERE sequence_schema = " +
        ns + " ORDER BY sequence_name");
    add("SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = " +
        ns + " AND NOT t.tgisinternal ORDER BY t.tgname");
    add("SELECT pg_get_functiondef(p.oid) FROM pg_proc p JOIN pg_namespace n ON n.oid = "
        "p.pronamespace WHERE n.nspname = " +
        ns + " ORDER BY p.proname");
    add("SELECT 'version ' || version || ' floor ' || fence_floor FROM " + name_ + ".idem_schema");
    return out;
  }

 private:
  std::string name_;
};

Dump postgres_store_dump() {
  PgNamespace made("store");
  PostgresStore store{PostgresStoreOptions{.connection = {.uri = made.uri()}, .pool = {.size = 1}}};
  const Status ready = store.ensure_schema();
  EXPECT_TRUE(ready.ok()) << ready.failure().describe();
  return made.dump();
}

TEST(SchemaFiles, PostgresStoreCreatesTheShippedSchema) {
  if (pg_base_uri().empty()) GTEST_SKIP() << "IDEM_TEST_PG_URI is not set";
  const Dump expected = postgres_store_dump();
  PgNamespace shipped("shipped");
  shipped.exec(slurp(IDEM_SHARE_DIR "/schema-postgresql.sql"));
  EXPECT_EQ(shipped.dump(), expected);
  CliRun check = idem_cli("--store " + q(shipped.uri()) + " schema check");
  EXPECT_EQ(check.status, 0) << check.out << check.err;
}

TEST(SchemaFiles, PostgresVersionOneIsOutdatedAndMigrateOrAStoreUpgradesIt) {
  if (pg_base_uri().empty()) GTEST_SKIP() << "IDEM_TEST_PG_URI is not set";
  const Dump expected = postgres_store_dump();
  PgNamespace old("v1");
  old.exec(kPostgresVersion1);
  CliRun check = idem_cli("--store " + q(old.uri()) + " schema check");
  EXPECT_EQ(check.status, 4) << check.out << check.err;
  EXPECT_NE(check.out.find("version 1 (this library: 3)"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("idem schema migrate"), std::string::npos) << check.out;
  CliRun migrate = idem_cli("--store " + q(old.uri()) + " schema migrate");
  EXPECT_EQ(migrate.status, 0) << migrate.out << migrate.err;
  EXPECT_EQ(old.dump(), expected);
  EXPECT_EQ(idem_cli("--store " + q(old.uri()) + " schema check").status, 0);

  PgNamespace opened("v1_opened");
  opened.exec(kPostgresVersion1);
  PostgresStore store{
      PostgresStoreOptions{.connection = {.uri = opened.uri()}, .pool = {.size = 1}}};
  const Status ready = store.ensure_schema();
  ASSERT_TRUE(ready.ok()) << ready.failure().describe();
  EXPECT_EQ(opened.dump(), expected);
}

#endif

}  // namespace
}  // namespace idem::testing
