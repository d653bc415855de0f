// The admin of a SQLite record store; it never creates the file, except to migrate the schema.

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Exception.h>
#include <SQLiteCpp/Statement.h>
#include <fmt/format.h>
#include <sqlite3.h>

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <utility>

#include "idem/sqlite/admin.hpp"
#include "idem/sqlite/store.hpp"
#include "sql/sql_admin.hpp"

namespace idem::admin {

namespace {

constexpr char kEmpty = 0;  // a non-null pointer for empty blobs: a null one binds NULL

// The file's absence, told apart from SQLite's "unable to open database file".
struct NoDatabase : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class SqliteAdminConnection final : public sql::AdminConnection {
 public:
  explicit SqliteAdminConnection(SqliteAdminOptions options) : options_(std::move(options)) {}

  std::vector<sql::Row> query(const std::string& sql, std::span<const sql::Param> params,
                              unsigned blob_columns) override {
    SQLite::Statement st(db(), sql);
    bind(st, params);
    std::vector<sql::Row> rows;
    while (st.executeStep()) {
      sql::Row& row = rows.emplace_back();
      for (int i = 0; i < st.getColumnCount(); ++i) {
        const SQLite::Column c = st.getColumn(i);
        if (c.isNull()) {
          row.emplace_back(std::nullopt);
        } else if (i < 32 && (blob_columns >> i & 1u) != 0) {
          const int n = c.getBytes();
          const void* data = c.getBlob();
          row.emplace_back(n > 0 && data != nullptr ? std::string(static_cast<const char*>(data),
                                                                  static_cast<std::size_t>(n))
                                                    : std::string());
        } else {
          row.emplace_back(std::to_string(c.getInt64()));
        }
      }
    }
    return rows;
  }

  std::int64_t exec(const std::string& sql, std::span<const sql::Param> params) override {
    SQLite::Statement st(db(), sql);
    bind(st, params);
    return st.exec();
  }

  void begin() override { db().exec("BEGIN IMMEDIATE"); }
  void commit() override { db().exec("COMMIT"); }
  void rollback() noexcept override {
    if (db_ && !db_->getHandle()) return;
    if (db_ && sqlite3_get_autocommit(db_->getHandle()) == 0) (void)db_->tryExec("ROLLBACK");
  }

  std::vector<std::string> missing(const sql::Statements& text) override {
    std::vector<std::string> wanted = {text.schema, text.records, text.records + "_expires_at",
                                       text.steps, text.entity_ops};
    wanted.insert(wanted.end(), text.step_triggers.begin(), text.step_triggers.end());
    std::vector<std::string> absent;
    SQLite::Statement st(db(), "SELECT count(*) FROM sqlite_master WHERE name = ?1");
    for (const std::string& name : wanted) {
      st.reset();
      st.bind(1, name);
      if (st.executeStep() && st.getColumn(0).getInt64() == 0) absent.push_back(name);
    }
    return absent;
  }

  void create_schema() override {
    db_.reset();  // the store's own opening creates the file and its schema
    SqliteStoreOptions store{.path = options_.path,
                             .table_prefix = options_.table_prefix,
                             .busy_timeout = options_.busy_timeout};
    std::unique_ptr<sql::Backend> backend = sql::make_sqlite_backend(store);
    backend->create_schema();
  }

  Failure failure(std::exception_ptr error) const noexcept override {
    try {
      std::rethrow_exception(std::move(error));
    } catch (const NoDatabase& e) {
      return make_failure(errc::store_unavailable, e.what());
    } catch (const SQLite::Exception& e) {
      return make_failure(errc::store_unavailable,
                          fmt::format("sqlite {}: {}", options_.path, e.what()));
    } catch (const std::exception& e) {
      return make_failure(errc::store_unavailable,
                          fmt::format("sqlite {}: {}", options_.path, e.what()));
    } catch (...) {
      return make_failure(errc::store_unavailable, "sqlite: unknown error");
    }
  }

 private:
  SQLite::Database& db() {
    if (!db_) {
      if (!std::filesystem::exists(options_.path)) {
        throw NoDatabase(fmt::format("sqlite {}: no such database file", options_.path));
      }
      db_.emplace(options_.path, SQLite::OPEN_READWRITE,
                  static_cast<int>(options_.busy_timeout.count()));
    }
    return *db_;
  }

  static void bind(SQLite::Statement& st, std::span<const sql::Param> params) {
    int i = 1;
    for (const sql::Param& p : params) {
      switch (p.kind) {
        case sql::Param::integer:
          st.bind(i, static_cast<std::int64_t>(p.number));
          break;
        case sql::Param::text:
          st.bind(i, std::string(p.string));
          break;
        case sql::Param::bytes:
          st.bind(i, p.string.empty() ? static_cast<const void*>(&kEmpty) : p.string.data(),
                  static_cast<int>(p.string.size()));
          break;
      }
      ++i;
    }
  }

  SqliteAdminOptions options_;
  std::optional<SQLite::Database> db_;
};

}  // namespace

std::unique_ptr<Admin> sqlite_admin(SqliteAdminOptions options) {
  if (options.path.empty()) throw std::invalid_argument("idem::admin::sqlite_admin: path is empty");
  if (!sql::valid_prefix(options.table_prefix)) {
    throw std::invalid_argument("idem::admin::sqlite_admin: table_prefix '" + options.table_prefix +
                                "' must be letters, digits and '_'");
  }
  const std::string prefix = options.table_prefix;
  return std::make_unique<sql::SqlAdmin>(
      sql::kSqlite, prefix, "", std::make_unique<SqliteAdminConnection>(std::move(options)));
}

const UriOpener sqlite_uri_opener{
    .forms = "sqlite:PATH",
    .open = [](std::string_view uri, const UriOptions& options) -> std::unique_ptr<Admin> {
      if (!uri.starts_with("sqlite:")) return nullptr;
      std::string_view path = uri.substr(7);
      if (path.starts_with("//")) path.remove_prefix(2);  // sqlite:///abs/path
      if (path.empty()) throw std::invalid_argument("the sqlite URI names no file (sqlite:PATH)");
      return sqlite_admin({.path = std::string(path), .table_prefix = options.table_prefix});
    }};

}  // namespace idem::admin
