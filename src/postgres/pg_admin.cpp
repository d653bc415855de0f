// The admin of a PostgreSQL record store: the SQL admin (src/sql/sql_admin.hpp) over one
// connection of its own, with a statement timeout, connected on first use.

#include <fmt/format.h>

#include <array>
#include <map>
#include <optional>
#include <utility>

#include "idem/postgres/admin.hpp"
#include "idem/postgres/store.hpp"
#include "postgres/pg_connection.hpp"
#include "postgres/pg_failure.hpp"
#include "postgres/pg_options.hpp"
#include "sql/sql_admin.hpp"

namespace idem::admin {

namespace {

std::string hex_bytea(std::string_view b) {
  static constexpr std::string_view kHex = "0123456789abcdef";
  std::string out = "\\x";
  for (char c : b) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back(kHex[u >> 4]);
    out.push_back(kHex[u & 0xf]);
  }
  return out;
}

class PgAdminConnection final : public sql::AdminConnection {
 public:
  explicit PgAdminConnection(PostgresAdminOptions options) : options_(std::move(options)) {}

  std::vector<sql::Row> query(const std::string& sql, std::span<const sql::Param> params,
                              unsigned blob_columns) override {
    const pqxx::result r = run(sql, params);
    std::vector<sql::Row> rows;
    rows.reserve(r.size());
    for (const auto& tuple : r) {
      sql::Row& row = rows.emplace_back();
      for (int i = 0; i < static_cast<int>(tuple.size()); ++i) {
        const auto f = tuple[i];
        if (f.is_null()) {
          row.emplace_back(std::nullopt);
        } else if (i < 32 && (blob_columns >> i & 1u) != 0) {
          row.emplace_back(pg::field_bytes(f));
        } else {
          row.emplace_back(std::string(f.c_str(), f.size()));
        }
      }
    }
    return rows;
  }

  std::int64_t exec(const std::string& sql, std::span<const sql::Param> params) override {
    return static_cast<std::int64_t>(pg::affected_rows(run(sql, params)));
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
    PostgresStoreOptions store{.uri = options_.uri,
                               .table_prefix = options_.table_prefix,
                               .pool_size = 1,
                               .connect_timeout = options_.connect_timeout,
                               .statement_timeout = options_.statement_timeout};
    sql::make_postgres_backend(store)->create_schema();
  }

  Failure failure(std::exception_ptr error) const noexcept override {
    bool broken = false;
    Failure f = pg::failure_of(std::move(error), broken, false);
    return f;
  }

 private:
  pg::Connection& connection() {
    if (!conn_) {
      const std::string conninfo = pg::with_network_defaults(options_.uri);
      conn_ = std::make_unique<pg::PgConnection>(
          conninfo, pg::connect_budget(options_.uri, options_.connect_timeout));
      pqxx::nontransaction tx(*conn_);
      tx.exec(fmt::format("SET statement_timeout = {}", options_.statement_timeout.count()));
      prepared_.clear();
    }
    return *conn_;
  }

  pqxx::result run(const std::string& sql, std::span<const sql::Param> params) {
    pg::Connection& c = connection();
    auto it = prepared_.find(sql);
    if (it == prepared_.end()) {
      std::string name = "idem_admin" + std::to_string(prepared_.size());
      pg::prepare(c, name, sql);
      it = prepared_.emplace(sql, std::move(name)).first;
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
    if (work_) return pg::exec_prepared_texts(*work_, it->second, values);
    pqxx::nontransaction tx(c);
    return pg::exec_prepared_texts(tx, it->second, values);
  }

  PostgresAdminOptions options_;
  std::unique_ptr<pg::PgConnection> conn_;
  std::map<std::string, std::string> prepared_;
  std::optional<pqxx::work> work_;
};

}  // namespace

std::unique_ptr<Admin> postgres_admin(PostgresAdminOptions options) {
  if (!sql::valid_prefix(options.table_prefix)) {
    throw std::invalid_argument("idem::admin::postgres_admin: table_prefix '" +
                                options.table_prefix + "' must be letters, digits and '_'");
  }
  const std::string prefix = options.table_prefix;
  return std::make_unique<sql::SqlAdmin>(sql::kPostgres, prefix, " FOR UPDATE",
                                         std::make_unique<PgAdminConnection>(std::move(options)));
}

const UriOpener postgres_uri_opener{
    .forms = "postgresql://...",
    .open = [](std::string_view uri, const UriOptions& options) -> std::unique_ptr<Admin> {
      if (!uri.starts_with("postgresql://") && !uri.starts_with("postgres://")) return nullptr;
      return postgres_admin({.uri = std::string(uri), .table_prefix = options.table_prefix});
    }};

}  // namespace idem::admin
