#pragma once
// The business tables of the payments service: payments and the outbox of events to publish.
// The guarded service writes them in the idempotency record's transaction; the bare twin in a
// transaction of its own, with the same statements. No unique constraint on (principal,
// idempotency_key): a double execution would show as two rows instead of being hidden by the
// database.

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/pqxx>
#include <string>

#include "idem/postgres/transaction.hpp"
#include "idem/sqlite/transaction.hpp"
#include "payments_config.hpp"
#include "pg_pool.hpp"

namespace payments {

using json = nlohmann::json;

class Database {
 public:
  explicit Database(const Config& c)
      : pg_(!c.pg_uri.empty()),
        location_(pg_ ? c.pg_uri : c.sqlite_path),
        payments_(c.prefix + "payments"),
        outbox_(c.prefix + "payments_outbox"),
        pg_pool_(location_, 16) {}

  void create_schema() {
    const std::string payments =
        "CREATE TABLE IF NOT EXISTS " + payments_ +
        " (id TEXT PRIMARY KEY, principal TEXT NOT NULL, idempotency_key TEXT NOT NULL, "
        "amount BIGINT NOT NULL, currency TEXT NOT NULL)";
    const std::string outbox = "CREATE TABLE IF NOT EXISTS " + outbox_ +
                               " (payment_id TEXT NOT NULL, event TEXT NOT NULL)";
    if (pg_) {
      pqxx::connection c(location_);
      pqxx::work w(c);
      w.exec(payments);
      w.exec(outbox);
      w.commit();
    } else {
      SQLite::Database db(location_, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE, 5000);
      db.exec("PRAGMA journal_mode=WAL");
      db.exec(payments);
      db.exec(outbox);
    }
  }

  /// Inside the record's transaction: the payment and its outbox event commit with the record.
  void insert(idem::Context& ctx, const json& payment, const std::string& principal,
              const std::string& key) {
    if (pg_) {
      insert(idem::pg_transaction(ctx), payment, principal, key);
    } else {
      insert(idem::sqlite_transaction(ctx), payment, principal, key);
    }
  }

  /// The bare twin: the same rows in a transaction of their own, on one connection per process
  /// for SQLite (as SqliteStore has) or a pooled one for PostgreSQL.
  void insert_alone(const json& payment, const std::string& principal, const std::string& key) {
    if (pg_) {
      PgPool::Lease c = pg_pool_.take();
      pqxx::work w(*c);
      insert(w, payment, principal, key);
      w.commit();
      return;
    }
    std::lock_guard lock(sqlite_mutex_);
    if (!sqlite_writer_) {
      sqlite_writer_ = std::make_unique<SQLite::Database>(location_, SQLite::OPEN_READWRITE, 5000);
      sqlite_writer_->exec("PRAGMA journal_mode = WAL");
      sqlite_writer_->exec("PRAGMA synchronous = NORMAL");  // as SqliteStore sets it
    }
    SQLite::Transaction t(*sqlite_writer_, SQLite::TransactionBehavior::IMMEDIATE);
    insert(*sqlite_writer_, payment, principal, key);
    t.commit();
  }

  /// The payment `id` if it belongs to `principal`.
  std::optional<json> find(const std::string& id, const std::string& principal) {
    const std::string select = "SELECT id, amount, currency FROM " + payments_ + " WHERE id = ";
    if (pg_) {
      PgPool::Lease c = pg_pool_.take();
      pqxx::nontransaction n(*c);
      pqxx::result r = n.exec_params(select + "$1 AND principal = $2", id, principal);
      if (r.empty()) return std::nullopt;
      return json{{"id", r[0][0].as<std::string>()},
                  {"amount", r[0][1].as<long long>()},
                  {"currency", r[0][2].as<std::string>()},
                  {"status", "succeeded"}};
    }
    SQLite::Database db(location_, SQLite::OPEN_READONLY, 5000);
    SQLite::Statement q(db, select + "?1 AND principal = ?2");
    q.bind(1, id);
    q.bind(2, principal);
    if (!q.executeStep()) return std::nullopt;
    return json{{"id", q.getColumn(0).getString()},
                {"amount", q.getColumn(1).getInt64()},
                {"currency", q.getColumn(2).getString()},
                {"status", "succeeded"}};
  }

 private:
  void insert(pqxx::dbtransaction& w, const json& payment, const std::string& principal,
              const std::string& key) {
    const std::string id = payment["id"];
    w.exec_params("INSERT INTO " + payments_ + " VALUES ($1, $2, $3, $4, $5)", id, principal, key,
                  payment["amount"].get<long long>(), payment["currency"].get<std::string>());
    w.exec_params("INSERT INTO " + outbox_ + " VALUES ($1, $2)", id, outbox_event(payment));
  }

  void insert(SQLite::Database& db, const json& payment, const std::string& principal,
              const std::string& key) {
    const std::string id = payment["id"];
    SQLite::Statement p(db, "INSERT INTO " + payments_ + " VALUES (?1, ?2, ?3, ?4, ?5)");
    p.bind(1, id);
    p.bind(2, principal);
    p.bind(3, key);
    p.bind(4, payment["amount"].get<std::int64_t>());
    p.bind(5, payment["currency"].get<std::string>());
    p.exec();
    SQLite::Statement o(db, "INSERT INTO " + outbox_ + " VALUES (?1, ?2)");
    o.bind(1, id);
    o.bind(2, outbox_event(payment));
    o.exec();
  }

  static std::string outbox_event(const json& payment) {
    return json{{"type", "payment.succeeded"}, {"payment", payment}}.dump();
  }

  bool pg_;
  std::string location_;
  std::string payments_;
  std::string outbox_;
  PgPool pg_pool_;
  std::mutex sqlite_mutex_;
  std::unique_ptr<SQLite::Database> sqlite_writer_;
};

}  // namespace payments
