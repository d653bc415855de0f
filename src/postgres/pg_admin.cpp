// The admin of a PostgreSQL record store: the SQL admin over one connection, opened on first use.

#include <fmt/format.h>

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "idem/postgres/admin.hpp"
#include "idem/postgres/store.hpp"
#include "postgres/pg_connection.hpp"
#include "postgres/pg_failure.hpp"
#include "postgres/pg_options.hpp"
#include "postgres/pg_values.hpp"
#include "sql/sql_admin.hpp"

namespace idem::admin {

namespace {

class PgAdminConnection final : public sql::AdminConnection {
 public:
  explicit PgAdminConnection(PostgresAdminOptions options) : options_(std::move(options)) {}

  std::vector<sql::Row> query(const std::string& sql, std::span<const sql::Param> params,
                              unsigned blob_columns) override {
    return postgres::detail::rows_of(run(sql, params), blob_columns);
  }

  std::int64_t exec(const std::string& sql, std::span<const sql::Param> params) override {
    return static_cast<std::int64_t>(postgres::detail::affected_rows(run(sql, params)));
  }

  void begin() override { work_.emplace(connection()); }
  void commit() override {
    work_->commit();
    work_.reset();
  }
  void rollback() noexcept override {
    try {
      if (work_) work_->abort();
    } catch (...) {  // the connection is gone: nothing stays open
    }
    work_.reset();
    if (conn_ && !conn_->is_open()) conn_.reset();
  }

  std::vector<std::string> missing(const sql::Statements& text) override {
    std::vector<std::string> absent;
    auto check = [&](const std::string& name, const char* absent_sql) {
      const std::array p{sql::Param{.kind = sql::Param::text, .string = name}};
      const pqxx::result r = run(absent_sql, p);
      if (!r.empty() && std::string_view(r[0][0].c_str()) == "t") absent.push_back(name);
    };
    for (const std::string& name : {text.schema, text.records, text.records + "_expires_at",
                                    text.fences, text.steps, text.entity_ops, text.entity_fences}) {
      check(name, "SELECT to_regclass($1) IS NULL");
    }
    check(text.steps + "_drop", "SELECT to_regproc($1) IS NULL");
    const std::string trigger_absent =
        "SELECT NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = $1 AND tgrelid = "
        "to_regclass('" +
        text.records + "'))";
    for (const std::string& name : text.step_triggers) {
      check(name, trigger_absent.c_str());
    }
    return absent;
  }

  void create_schema() override {
    const PostgresStoreOptions store{.connection = options_.connection, .pool = {.size = 1}};
    sql::make_postgres_backend(store)->create_schema();
  }

  Failure failure(std::exception_ptr error) const noexcept override {
    bool broken = false;
    return postgres::detail::failure_of(std::move(error), broken, false);
  }

 private:
  postgres::detail::Connection& connection() {
    if (!conn_) {
      const postgres::ConnectionOptions& o = options_.connection;
      conn_ = std::make_unique<postgres::detail::PgConnection>(
          postgres::detail::with_network_defaults(o.uri),
          postgres::detail::connect_budget(o.uri, o.connect_timeout));
      pqxx::nontransaction tx(*conn_);
      tx.exec(fmt::format("SET statement_timeout = {}", o.statement_timeout.count()));
      prepared_.clear();
    }
    return *conn_;
  }

  pqxx::result run(const std::string& sql, std::span<const sql::Param> params) {
    postgres::detail::Connection& c = connection();
    auto it = prepared_.find(sql);
    if (it == prepared_.end()) {
      std::string name = "idem_admin" + std::to_string(prepared_.size());
      postgres::detail::prepare(c, name, sql);
      it = prepared_.emplace(sql, std::move(name)).first;
    }
    const std::vector<std::string> values = postgres::detail::text_values(params);
    if (work_) return postgres::detail::exec_prepared_texts(*work_, it->second, values);
    pqxx::nontransaction tx(c);
    return postgres::detail::exec_prepared_texts(tx, it->second, values);
  }

  PostgresAdminOptions options_;
  std::unique_ptr<postgres::detail::PgConnection> conn_;
  std::map<std::string, std::string> prepared_;
  std::optional<pqxx::work> work_;
};

}  // namespace

std::unique_ptr<Admin> postgres_admin(PostgresAdminOptions options) {
  const std::string prefix = options.connection.table_prefix;
  if (!sql::valid_prefix(prefix)) {
    throw std::invalid_argument("idem::admin::postgres_admin: connection.table_prefix '" + prefix +
                                "' must be letters, digits and '_'");
  }
  return std::make_unique<sql::SqlAdmin>(sql::kPostgres, prefix, " FOR UPDATE",
                                         std::make_unique<PgAdminConnection>(std::move(options)));
}

const UriOpener postgres_uri_opener{
    .forms = "postgresql://...",
    .open = [](std::string_view uri, const UriOptions& options) -> std::unique_ptr<Admin> {
      if (!uri.starts_with("postgresql://") && !uri.starts_with("postgres://")) return nullptr;
      return postgres_admin(
          {.connection = {.uri = std::string(uri), .table_prefix = options.table_prefix}});
    }};

}  // namespace idem::admin
