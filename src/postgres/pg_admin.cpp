// The admin of a PostgreSQL record store: the SQL admin over one connection, opened on first use.

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "idem/postgres/admin.hpp"
#include "idem/postgres/store.hpp"
#include "postgres/pg_failure.hpp"
#include "postgres/pg_link.hpp"
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
    return static_cast<std::int64_t>(run(sql, params).affected);
  }

  void begin() override {
    script("BEGIN");
    in_transaction_ = true;
  }
  void commit() override {
    script("COMMIT");
    in_transaction_ = false;
  }
  void rollback() noexcept override {
    try {
      if (std::exchange(in_transaction_, false) && link_ && link_->is_open()) script("ROLLBACK");
    } catch (...) {  // the connection is gone: nothing stays open
    }
    if (link_ && !link_->is_open()) link_.reset();
  }

  std::vector<std::string> missing(const sql::Statements& text) override {
    std::vector<std::string> absent;
    auto check = [&](const std::string& name, const std::string& absent_sql) {
      const std::array p{sql::Param{.kind = sql::Param::text, .string = name}};
      const postgres::detail::Reply r = run(absent_sql, p);
      if (r.row_count() > 0 && r.text(0, 0) == "t") absent.push_back(name);
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
    for (const std::string& name : text.step_triggers) check(name, trigger_absent);
    check(text.records + "_wake", "SELECT to_regproc($1) IS NULL");
    for (const std::string& name : text.wake_triggers) check(name, trigger_absent);
    check(text.records + ".waiters",
          "SELECT NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('" +
              text.records + "') AND attname = 'waiters' AND NOT attisdropped) AND $1 <> ''");
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
  using Query = postgres::detail::Query;

  // Opened on first use, and again after it failed (not inside a transaction, which went with it).
  postgres::detail::PgLink& link() {
    if (link_ && !link_->is_open()) {
      if (in_transaction_)
        throw postgres::detail::LinkLost("idem: the transaction's connection is gone");
      link_.reset();
    }
    if (!link_) {
      const postgres::ConnectionOptions& o = options_.connection;
      link_ = std::make_unique<postgres::detail::PgLink>(
          postgres::detail::with_network_defaults(o.uri),
          postgres::detail::connect_budget(o.uri, o.connect_timeout));
      prepared_.clear();
      link_->run({.kind = Query::script,
                  .sql = fmt::format("SET statement_timeout = {}", o.statement_timeout.count())},
                 budget());
    }
    return *link_;
  }

  std::chrono::milliseconds budget() const {
    return options_.connection.statement_timeout + postgres::detail::kReplyMargin;
  }

  void script(const std::string& sql) { link().run({.kind = Query::script, .sql = sql}, budget()); }

  postgres::detail::Reply run(const std::string& sql, std::span<const sql::Param> params) {
    postgres::detail::PgLink& l = link();
    auto it = prepared_.find(sql);
    if (it == prepared_.end()) {
      std::string name = "idem_admin" + std::to_string(prepared_.size());
      l.run({.kind = Query::prepare, .name = name.c_str(), .sql = sql}, budget());
      it = prepared_.emplace(sql, std::move(name)).first;
    }
    return l.run({.kind = Query::prepared,
                  .name = it->second.c_str(),
                  .values = postgres::detail::text_values(params)},
                 budget());
  }

  PostgresAdminOptions options_;
  std::unique_ptr<postgres::detail::PgLink> link_;
  std::map<std::string, std::string> prepared_;  // statement text -> name, on link_
  bool in_transaction_ = false;
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
