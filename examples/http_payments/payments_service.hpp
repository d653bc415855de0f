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
#include "idem/http.hpp"
#include "idem/layered_guard.hpp"
#include "idem/sql/store.hpp"
#include "metrics_route.hpp"
#include "payment_request.hpp"
#include "payments_database.hpp"
#include "problem_json.hpp"
#include "transport/router.hpp"

namespace payments {

using namespace std::chrono_literals;

/// What the service mounts on the transport's Router.
class Service {
 public:
  virtual ~Service() = default;
  virtual void mount(transport::Router& server) = 0;
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
        with_token_(idem::LayeredOptions{.policy = {.observer = metrics_observer()}},
                    idem::RequestIdLayer<Cache>{cache, gateway}, idem::TokenLayer{tokens},
                    record_layer(records)),
        without_token_(idem::LayeredOptions{.policy = {.observer = metrics_observer()}},
                       idem::RequestIdLayer<Cache>{cache, gateway}, record_layer(records)) {}

  void mount(transport::Router& server) override {
    mount_common_routes(server, db_);
    mount_metrics(server);
    server.get("/tokens", [this](const httplib::Request&, httplib::Response& res) {
      idem::Result<std::string> token = tokens_.issue(10min);
      if (!token) {
        return problem(res, 503, "store_unavailable", "Token store unavailable",
                       token.failure().describe());
      }
      res.status = 201;
      res.set_content(json{{"token", token.value()}}.dump(), "application/json");
    });
    server.post("/payments", [this](const httplib::Request& req, httplib::Response& res) {
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
      // What every repeat replays: the status, the payment's Location and the body.
      return idem::http::StoredResponse{
          201,
          {{"Location", payment_location(payment)}, {"Content-Type", "application/json"}},
          payment.dump()};
    };
    try {
      if (token.empty()) {
        answer(res, without_token_.execute(request, handler));
      } else {
        answer(res, with_token_.execute(request, handler));
      }
    } catch (const std::exception& e) {
      // The key was released (no remember_failures here): a retry pays again (handler_aborted).
      problem(res, 500, "handler_aborted", "Payment failed", e.what());
    }
  }

  // An error is problem+json with the status idem::http maps it to, and Retry-After where a retry
  // helps: for a key in flight, the seconds left on its holder's lease (the earliest takeover; a
  // commit before then replays sooner, at the retry). A fresh payment whose commit failed
  // (store_unavailable) or is in doubt (outcome_unknown, 504) is no 201 either: its rows are
  // written in the record's transaction and went, or may have gone, with it. The client sends
  // the same key again, which replays the payment if it was recorded and pays once if not.
  static void answer(httplib::Response& res, const idem::Outcome<idem::http::StoredResponse>& out) {
    if (auto problem = idem::http::problem_for(out, {.type_base = std::string(kProblemTypeBase)})) {
      res.status = problem->status;
      res.set_content(problem->body, std::string(idem::http::kProblemContentType));
      if (problem->retry_after)
        res.set_header("Retry-After", std::to_string(*problem->retry_after));
      return;
    }
    const idem::http::StoredResponse& stored = out.value();
    res.status = stored.status;
    for (const auto& [name, value] : stored.headers) {
      if (!idem::http::equals_ignoring_case(name, "Content-Type")) res.set_header(name, value);
    }
    const std::string_view type = stored.header("Content-Type");
    res.set_content(stored.body, type.empty() ? "application/octet-stream" : std::string(type));
    if (out.replayed()) res.set_header("Idempotent-Replayed", "true");
  }

  Tokens& tokens_;
  Database& db_;
  std::chrono::milliseconds delay_;
  idem::ThreeTierGuard<Cache, Tokens, idem::SqlStore> with_token_;
  idem::LayeredGuard<idem::RequestIdLayer<Cache>, idem::RecordLayer<idem::SqlStore>> without_token_;
};

}  // namespace payments
