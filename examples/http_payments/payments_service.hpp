#pragma once
// The payments service behind examples/http_payments: an HTTP API that speaks the IETF httpapi
// Idempotency-Key draft on top of idem::LayeredGuard (gateway request-ID cache -> one-time token
// -> SQL record in transactional mode). Shared by the server binary and the self-checking demo.

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/pqxx>
#include <random>
#include <string>
#include <thread>
#include <utility>

#include "idem/layered_guard.hpp"
#include "idem/stores/memory_request_id_cache.hpp"
#include "idem/stores/memory_token_store.hpp"
#include "idem/stores/postgres_store.hpp"
#include "idem/stores/postgres_transaction.hpp"
#include "idem/stores/redis_token_store.hpp"
#include "idem/stores/request_id_cache.hpp"
#include "idem/stores/sqlite_store.hpp"
#include "idem/stores/sqlite_transaction.hpp"
#include "request_headers.hpp"

namespace payments {

using json = nlohmann::json;
using namespace std::chrono_literals;

struct Config {
  std::string sqlite_path = "http_payments.db";     // used when pg_uri is empty
  std::string pg_uri{};                             // PostgreSQL instead of SQLite
  std::string redis_uri{};                          // Redis gateway cache and tokens, else memory
  std::chrono::milliseconds handler_delay{0};       // slows the payment handler (tests, demos)
  std::chrono::milliseconds gateway_lease{30'000};  // how long a crashed request holds its id
  std::string prefix{};  // prefixes table names and Redis keys, so several services share servers
};

// The business tables: payments and the outbox of events to publish, written in the record's
// transaction. No unique constraint on (principal, idempotency_key): a double execution would
// show as two rows instead of being hidden by the database.
class Database {
 public:
  explicit Database(const Config& c)
      : pg_(!c.pg_uri.empty()),
        location_(pg_ ? c.pg_uri : c.sqlite_path),
        payments_(c.prefix + "payments"),
        outbox_(c.prefix + "payments_outbox") {}

  const std::string& payments_table() const { return payments_; }
  const std::string& outbox_table() const { return outbox_; }

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

  // Inside the record's transaction: the payment and its outbox event commit with the record.
  void insert(idem::Context& ctx, const json& payment, const std::string& principal,
              const std::string& key) {
    const std::string id = payment["id"];
    const std::string event = json{{"type", "payment.succeeded"}, {"payment", payment}}.dump();
    if (pg_) {
      pqxx::dbtransaction& w = idem::pg_transaction(ctx);
      w.exec_params("INSERT INTO " + payments_ + " VALUES ($1, $2, $3, $4, $5)", id, principal, key,
                    payment["amount"].get<long long>(), payment["currency"].get<std::string>());
      w.exec_params("INSERT INTO " + outbox_ + " VALUES ($1, $2)", id, event);
    } else {
      SQLite::Database& db = idem::sqlite_transaction(ctx);
      SQLite::Statement p(db, "INSERT INTO " + payments_ + " VALUES (?1, ?2, ?3, ?4, ?5)");
      p.bind(1, id);
      p.bind(2, principal);
      p.bind(3, key);
      p.bind(4, payment["amount"].get<std::int64_t>());
      p.bind(5, payment["currency"].get<std::string>());
      p.exec();
      SQLite::Statement o(db, "INSERT INTO " + outbox_ + " VALUES (?1, ?2)");
      o.bind(1, id);
      o.bind(2, event);
      o.exec();
    }
  }

  // The payment `id` if it belongs to `principal`.
  std::optional<json> find(const std::string& id, const std::string& principal) {
    const std::string select = "SELECT id, amount, currency FROM " + payments_ + " WHERE id = ";
    if (pg_) {
      std::lock_guard lock(pg_mutex_);
      if (!pg_read_) pg_read_ = std::make_unique<pqxx::connection>(location_);
      pqxx::nontransaction n(*pg_read_);
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
  bool pg_;
  std::string location_;
  std::string payments_;
  std::string outbox_;
  std::mutex pg_mutex_;
  std::unique_ptr<pqxx::connection> pg_read_;
};

// An RFC 9457 problem document.
inline void problem(httplib::Response& res, int status, std::string_view type, std::string title,
                    std::string detail) {
  res.status = status;
  res.set_content(json{{"type", "urn:idem:problem:" + std::string(type)},
                       {"title", std::move(title)},
                       {"status", status},
                       {"detail", std::move(detail)}}
                      .dump(),
                  "application/problem+json");
}

inline std::string random_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return std::string("pay_") + buf;
}

inline std::optional<std::string> principal_of(const httplib::Request& req) {
  return bearer_principal(req.get_header_value("Authorization"));
}

/// What the service mounts on an httplib::Server.
class Service {
 public:
  virtual ~Service() = default;
  virtual void mount(httplib::Server& server) = 0;
};

template <class Cache, class Tokens>
class PaymentsService final : public Service {
 public:
  PaymentsService(Cache& cache, Tokens& tokens, idem::SqlStore& records, Database& db,
                  std::chrono::milliseconds delay)
      : tokens_(tokens),
        db_(db),
        delay_(delay),
        with_token_(idem::RequestIdLayer{cache}, idem::TokenLayer{tokens}, record_layer(records)),
        without_token_(idem::RequestIdLayer{cache}, record_layer(records)) {}

  void mount(httplib::Server& server) override {
    server.Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"status":"ok"})", "application/json");
    });
    server.Get("/tokens", [this](const httplib::Request&, httplib::Response& res) {
      idem::Result<std::string> token = tokens_.issue(10min);
      if (!token) {
        return problem(res, 503, "store_unavailable", "Token store unavailable",
                       token.failure().describe());
      }
      res.status = 201;
      res.set_content(json{{"token", token.value()}}.dump(), "application/json");
    });
    server.Get(R"(/payments/([A-Za-z0-9_]+))",
               [this](const httplib::Request& req, httplib::Response& res) {
                 const auto principal = principal_of(req);
                 if (!principal) return unauthorized(res);
                 std::optional<json> p = db_.find(req.matches[1], *principal);
                 if (!p) return problem(res, 404, "not_found", "No such payment", req.matches[1]);
                 res.set_content(p->dump(), "application/json");
               });
    server.Post("/payments", [this](const httplib::Request& req, httplib::Response& res) {
      post_payment(req, res);
    });
  }

 private:
  static idem::RecordLayer<idem::SqlStore> record_layer(idem::SqlStore& records) {
    // block_for: wait for the database's write lock (SQLite) or a holder's row (PostgreSQL)
    // instead of answering 409 to requests for other keys.
    return idem::RecordLayer<idem::SqlStore>(
        records, idem::LayerSettings{.name = "record", .scope = "payments", .block_for = 5s});
  }

  static void unauthorized(httplib::Response& res) {
    problem(res, 401, "unauthorized", "Missing credentials",
            "send Authorization: Bearer <name> (demo authentication)");
    res.set_header("WWW-Authenticate", "Bearer");
  }

  void post_payment(const httplib::Request& req, httplib::Response& res) {
    const auto principal = principal_of(req);
    if (!principal) return unauthorized(res);
    const IdempotencyKey parsed = parse_idempotency_key(req.get_header_value("Idempotency-Key"));
    if (!parsed.ok()) {
      return problem(res, 400, "key_invalid", std::string(parsed.error),
                     "POST /payments needs an Idempotency-Key header: a quoted string or "
                     "printable ASCII, at most 255 bytes");
    }
    const std::string& key = parsed.key;
    json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (!body.is_object() || !body.contains("amount") || !body["amount"].is_number_integer() ||
        body["amount"].get<long long>() <= 0 || !body.contains("currency") ||
        !body["currency"].is_string() || body["currency"].get<std::string>().size() != 3) {
      return problem(res, 400, "invalid_body", "Invalid payment",
                     R"(the body must be a JSON object {"amount": <positive integer>, )"
                     R"("currency": "<3 letters>"})");
    }
    // Canonical form: the same payment with other whitespace or key order is the same payload.
    const std::string payload = body.dump();
    const std::string token = req.get_header_value("Payment-Token");
    const idem::LayeredRequest request{key, token, key, *principal, payload};

    auto handler = [&](idem::Context& ctx) {
      if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
      const json payment{{"id", random_id()},
                         {"amount", body["amount"]},
                         {"currency", body["currency"]},
                         {"status", "succeeded"}};
      db_.insert(ctx, payment, *principal, key);
      return format_stored_answer(201, payment.dump());  // what every repeat replays
    };
    try {
      if (token.empty()) {
        answer(res, without_token_.execute(request, handler));
      } else {
        answer(res, with_token_.execute(request, handler));
      }
    } catch (const std::exception& e) {
      problem(res, 500, "handler_failed", "Payment failed", e.what());
    }
  }

  static void answer(httplib::Response& res, const idem::Outcome<std::string>& out) {
    if (!out) {
      const std::error_code e = out.error();
      const int status = idem::http_status(e);
      std::string type(e.category() == idem::error_category()
                           ? idem::to_string(static_cast<idem::errc>(e.value()))
                           : "error");
      problem(res, status, type, e.message(), out.message());
      if (idem::is_retryable(e)) res.set_header("Retry-After", "1");
      return;
    }
    const std::optional<StoredAnswer> stored = parse_stored_answer(out.value());
    if (!stored) {
      return problem(res, 500, "record_corrupt", "Stored answer cannot be read",
                     "the record under this key does not hold an answer of this service");
    }
    res.status = stored->status;
    res.set_content(std::string(stored->body), "application/json");
    if (out.replayed()) res.set_header("Idempotent-Replayed", "true");
  }

  Tokens& tokens_;
  Database& db_;
  std::chrono::milliseconds delay_;
  idem::ThreeTierGuard<Cache, Tokens, idem::SqlStore> with_token_;
  idem::LayeredGuard<idem::RequestIdLayer<Cache>, idem::RecordLayer<idem::SqlStore>> without_token_;
};

/// Owns the stores and the service for one Config; mount() it on a server.
class App {
 public:
  explicit App(Config config) : config_(std::move(config)), db_(config_) {
    if (config_.pg_uri.empty()) {
      records_ = std::make_unique<idem::SqliteStore>(
          idem::SqliteStoreOptions{.path = config_.sqlite_path,
                                   .mode = idem::SqlMode::transactional,
                                   .table_prefix = config_.prefix + "idem_"});
    } else {
      records_ = std::make_unique<idem::PostgresStore>(
          idem::PostgresStoreOptions{.uri = config_.pg_uri,
                                     .mode = idem::SqlMode::transactional,
                                     .table_prefix = config_.prefix + "idem_",
                                     .pool_size = 16});
    }
    db_.create_schema();
    if (idem::Status s = records_->ensure_schema(); !s) {
      throw std::runtime_error("record store: " + s.failure().describe());
    }
    if (config_.redis_uri.empty()) {
      idem::MemoryRequestIdCacheOptions cache_options;
      cache_options.guard.lease = config_.gateway_lease;
      memory_cache_ = std::make_unique<idem::MemoryRequestIdCache>(std::move(cache_options));
      memory_tokens_ = std::make_unique<idem::MemoryTokenStore>();
      service_ =
          std::make_unique<PaymentsService<idem::MemoryRequestIdCache, idem::MemoryTokenStore>>(
              *memory_cache_, *memory_tokens_, *records_, db_, config_.handler_delay);
    } else {
      idem::Result<idem::redis::ConnectionOptions> o =
          idem::redis::ConnectionOptions::from_uri(config_.redis_uri);
      if (!o) throw std::runtime_error("--redis: " + o.failure().describe());
      o.value().pool_size = 16;
      redis_ = std::make_shared<idem::redis::Client>(o.value());
      idem::RequestIdCacheOptions cache_options{.prefix = config_.prefix + "payments:req:"};
      cache_options.guard.lease = config_.gateway_lease;
      redis_cache_ = std::make_unique<idem::RequestIdCache>(redis_, std::move(cache_options));
      redis_tokens_ = std::make_unique<idem::RedisTokenStore>(
          redis_, idem::RedisTokenStoreOptions{.prefix = config_.prefix + "payments:token:"});
      service_ = std::make_unique<PaymentsService<idem::RequestIdCache, idem::RedisTokenStore>>(
          *redis_cache_, *redis_tokens_, *records_, db_, config_.handler_delay);
    }
  }

  void mount(httplib::Server& server) { service_->mount(server); }

 private:
  Config config_;
  Database db_;
  std::unique_ptr<idem::SqlStore> records_;
  std::unique_ptr<idem::MemoryRequestIdCache> memory_cache_;
  std::unique_ptr<idem::MemoryTokenStore> memory_tokens_;
  std::shared_ptr<idem::redis::Client> redis_;
  std::unique_ptr<idem::RequestIdCache> redis_cache_;
  std::unique_ptr<idem::RedisTokenStore> redis_tokens_;
  std::unique_ptr<Service> service_;
};

}  // namespace payments
