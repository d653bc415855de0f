#pragma once
// The payments service: POST /payments speaks the IETF httpapi Idempotency-Key draft on
// idem::LayeredGuard (gateway request-ID cache -> one-time token -> SQL record in transactional
// mode), plus GET /payments/{id}, GET /tokens and GET /health.

#include <httplib.h>

#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "common_routes.hpp"
#include "idem/layered_guard.hpp"
#include "idem/stores/sql_store.hpp"
#include "metrics_route.hpp"
#include "payment_request.hpp"
#include "payments_database.hpp"
#include "problem_json.hpp"
#include "request_headers.hpp"

namespace payments {

using namespace std::chrono_literals;

/// What the service mounts on an httplib::Server.
class Service {
 public:
  virtual ~Service() = default;
  virtual void mount(httplib::Server& server) = 0;
};

template <class Cache, class Tokens>
class PaymentsService final : public Service {
 public:
  /// `gateway` are the request-ID cache's own scope, lease and ttl (Cache may be a CachedStore
  /// in front of it, which has no options of its own).
  PaymentsService(Cache& cache, const idem::LayerSettings& gateway, Tokens& tokens,
                  idem::SqlStore& records, Database& db, std::chrono::milliseconds delay)
      : tokens_(tokens),
        db_(db),
        delay_(delay),
        with_token_(idem::LayeredOptions{.observer = metrics_observer()},
                    idem::RequestIdLayer<Cache>{cache, gateway}, idem::TokenLayer{tokens},
                    record_layer(records)),
        without_token_(idem::LayeredOptions{.observer = metrics_observer()},
                       idem::RequestIdLayer<Cache>{cache, gateway}, record_layer(records)) {}

  void mount(httplib::Server& server) override {
    mount_common_routes(server, db_);
    mount_metrics(server);
    server.Get("/tokens", [this](const httplib::Request&, httplib::Response& res) {
      idem::Result<std::string> token = tokens_.issue(10min);
      if (!token) {
        return problem(res, 503, "store_unavailable", "Token store unavailable",
                       token.failure().describe());
      }
      res.status = 201;
      res.set_content(json{{"token", token.value()}}.dump(), "application/json");
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

  void post_payment(const httplib::Request& req, httplib::Response& res) {
    std::optional<PaymentRequest> r = read_payment_request(req, res);
    if (!r) return;
    const std::string token = req.get_header_value("Payment-Token");
    // The request id and the business key are both the Idempotency-Key.
    const idem::LayeredRequest request{r->key, token, r->key, r->principal, r->payload};
    auto handler = [&](idem::Context& ctx) {
      if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
      const json payment = new_payment(r->body);
      db_.insert(ctx, payment, r->principal, r->key);
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

  // Seconds until a retry can succeed: for a key in flight, until its holder's lease ends (the
  // earliest takeover; a commit before then replays sooner, at the retry); otherwise 1.
  static std::string retry_after(const idem::Outcome<std::string>& out) {
    const auto ms = out.retry_after().count();
    return std::to_string(ms > 1000 ? (ms + 999) / 1000 : 1);
  }

  static void answer(httplib::Response& res, const idem::Outcome<std::string>& out) {
    if (!out) return answer_error(res, out.error(), out.message(), retry_after(out));
    // The payment's rows are written in the record's transaction: a commit that failed
    // (store_unavailable) rolled them back with it, and one in doubt (outcome_unknown, 504) may
    // have. Either way this is no 201: the client sends the same key again, which replays the
    // payment if it was recorded and pays once if it was not.
    if (out.executed() && !out.recorded() && idem::is_retryable(out.commit_error())) {
      return answer_error(res, out.commit_error(), out.commit_failure().describe(), "1");
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

  // Status from idem::http_status(), problem type from the code's name, Retry-After (seconds)
  // where a retry helps.
  static void answer_error(httplib::Response& res, std::error_code e, std::string detail,
                           const std::string& retry_after) {
    const std::string type(e.category() == idem::error_category()
                               ? idem::to_string(static_cast<idem::errc>(e.value()))
                               : "error");
    problem(res, idem::http_status(e), type, e.message(), std::move(detail));
    if (idem::is_retryable(e)) res.set_header("Retry-After", retry_after);
  }

  Tokens& tokens_;
  Database& db_;
  std::chrono::milliseconds delay_;
  idem::ThreeTierGuard<Cache, Tokens, idem::SqlStore> with_token_;
  idem::LayeredGuard<idem::RequestIdLayer<Cache>, idem::RecordLayer<idem::SqlStore>> without_token_;
};

}  // namespace payments
