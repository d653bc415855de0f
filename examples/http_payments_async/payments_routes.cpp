#include "payments_routes.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "idem/asio/async_guard.hpp"
#include "idem/asio/async_store.hpp"
#include "idem/http.hpp"
#include "idem/memory/token_store.hpp"
#include "idem/postgres/async_store.hpp"
#include "payment_checks.hpp"
#include "payment_rows.hpp"
#include "problem_body.hpp"

namespace payments_async {

namespace net = boost::asio;
using idem::http::StoredResponse;
using namespace std::chrono_literals;

namespace {

HttpResponse json_response(int status, std::string body) {
  return HttpResponse{status, {{"Content-Type", "application/json"}}, std::move(body)};
}

HttpResponse problem(int status, std::string_view type, std::string title, std::string detail) {
  return HttpResponse{status,
                      {{"Content-Type", std::string(idem::http::kProblemContentType)}},
                      payments::problem_body(status, type, std::move(title), std::move(detail))};
}

HttpResponse refused(const payments::Refusal& r) {
  HttpResponse res = problem(r.status, r.type, r.title, r.detail);
  if (r.status == 401) res.headers.emplace_back("WWW-Authenticate", "Bearer");
  return res;
}

// As the blocking service answers: an error is problem+json with the status idem::http maps it
// to and Retry-After where a retry helps (for a key in flight, the seconds left on its holder's
// lease); a payment whose commit failed or is in doubt is no 201 (the client sends the key
// again, which replays the payment if it was recorded). A payment is its stored answer:
// status, Location, Content-Type and body, marked Idempotent-Replayed on a repeat.
HttpResponse answer(const idem::Outcome<StoredResponse>& out, bool replayed) {
  if (auto p =
          idem::http::problem_for(out, {.type_base = std::string(payments::kProblemTypeBase)})) {
    HttpResponse res{
        p->status, {{"Content-Type", std::string(idem::http::kProblemContentType)}}, p->body};
    if (p->retry_after) res.headers.emplace_back("Retry-After", std::to_string(*p->retry_after));
    return res;
  }
  const StoredResponse& stored = out.value();
  HttpResponse res{stored.status, {}, stored.body};
  for (const auto& [name, value] : stored.headers) {
    if (!idem::http::equals_ignoring_case(name, "Content-Type"))
      res.headers.emplace_back(name, value);
  }
  const std::string_view type = stored.header("Content-Type");
  res.headers.emplace_back("Content-Type",
                           type.empty() ? "application/octet-stream" : std::string(type));
  if (replayed) res.headers.emplace_back("Idempotent-Replayed", "true");
  return res;
}

// The id in /payments/{id}: letters, digits and '_'; nullopt for any other path.
std::optional<std::string> payment_id_of(std::string_view path) {
  constexpr std::string_view kPrefix = "/payments/";
  if (path.substr(0, kPrefix.size()) != kPrefix || path.size() == kPrefix.size()) {
    return std::nullopt;
  }
  const std::string_view id = path.substr(kPrefix.size());
  for (const char ch : id) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '_';
    if (!ok) return std::nullopt;
  }
  return std::string(id);
}

// The record's refusal or failure, carried out of the token's handler: the token's guard then
// returns the token to pending (as for any handler that throws), and the client gets the
// record's answer.
struct RecordRefused {
  std::shared_ptr<const idem::Outcome<StoredResponse>> outcome;
};

}  // namespace

class PaymentsRoutes::Impl {
 public:
  Impl(const net::any_io_executor& executor, const payments::Config& config)
      : config_(config),
        rows_(executor, config.pg_uri, config.prefix),
        records_(
            executor,
            idem::AsyncPostgresStoreOptions{
                .connection = {.uri = config.pg_uri, .table_prefix = config.prefix + "idem_"}}),
        record_guard_(records_, idem::Options{.scope = "payments", .lease = config.gateway_lease}),
        token_calls_(tokens_),
        token_guard_(token_calls_, tokens_.options()) {}

  net::awaitable<HttpResponse> handle(const HttpRequest& req) {
    if (req.method == "GET") {
      if (req.path == "/health") co_return json_response(200, R"({"status":"ok"})");
      if (req.path == "/tokens") co_return issue_token();
      if (std::optional<std::string> id = payment_id_of(req.path)) {
        co_return co_await get_payment(*id, req);
      }
    } else if (req.method == "POST" && req.path == "/payments") {
      co_return co_await post_payment(req);
    }
    co_return problem(404, "not_found", "No such route", req.method + " " + req.path);
  }

 private:
  HttpResponse issue_token() {
    idem::Result<std::string> token = tokens_.issue(10min);
    if (!token) {
      return problem(503, "store_unavailable", "Token store unavailable",
                     token.failure().describe());
    }
    return json_response(201, payments::json{{"token", token.value()}}.dump());
  }

  net::awaitable<HttpResponse> get_payment(const std::string& id, const HttpRequest& req) {
    const std::optional<std::string> principal =
        payments::bearer_principal(req.header("Authorization"));
    if (!principal) co_return refused(payments::unauthorized_refusal());
    std::optional<payments::json> payment;
    std::string failure;
    try {
      payment = co_await rows_.find(id, *principal);
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (!failure.empty()) {
      co_return problem(503, "store_unavailable", "Payments unavailable", failure);
    }
    if (!payment) co_return problem(404, "not_found", "No such payment", id);
    co_return json_response(200, payment->dump());
  }

  // With a Payment-Token, the token's guard runs the record's: the token pays once, and reused
  // (for any key of its bearer) it replays what it paid. Without one, the record's guard alone.
  net::awaitable<HttpResponse> post_payment(const HttpRequest& req) {
    std::variant<payments::PaymentRequest, payments::Refusal> checked =
        payments::check_payment_request(req.header("Authorization"), req.values("Idempotency-Key"),
                                        req.body);
    if (const auto* r = std::get_if<payments::Refusal>(&checked)) co_return refused(*r);
    const payments::PaymentRequest p = std::move(std::get<payments::PaymentRequest>(checked));
    const std::string token(req.header("Payment-Token"));
    std::optional<HttpResponse> res;
    try {
      if (token.empty()) {
        const idem::Outcome<StoredResponse> out = co_await pay(p);
        res = answer(out, out.replayed());
      } else {
        bool record_replayed = false;
        const idem::Outcome<StoredResponse> out = co_await token_guard_.async_execute(
            idem::Key{token}, token_payload(p), [&]() -> net::awaitable<StoredResponse> {
              idem::Outcome<StoredResponse> paid = co_await pay(p);
              if (idem::http::problem_for(paid)) {
                throw RecordRefused{
                    std::make_shared<const idem::Outcome<StoredResponse>>(std::move(paid))};
              }
              record_replayed = paid.replayed();
              co_return paid.value();
            });
        res = answer(out, out.replayed() || record_replayed);
      }
    } catch (const RecordRefused& r) {
      res = answer(*r.outcome, r.outcome->replayed());
    } catch (const std::exception& e) {
      // The payment's rows could not be written (or read back): nothing is recorded for the
      // key, which is free again; the client may send it again.
      res = problem(503, "store_unavailable", "Payment not recorded", e.what());
    }
    co_return std::move(*res);
  }

  // What the token's guard fingerprints: the payload bound to the bearer (its length first, so
  // no bearer and body join to another pair's), so a token one bearer paid with is, to another
  // bearer, a token used with another payload, never that payment's replay, as the layered
  // guard's token layer does for the blocking service.
  static std::string token_payload(const payments::PaymentRequest& p) {
    return std::to_string(p.principal.size()) + ':' + p.principal + p.payload;
  }

  // The record's guard: the handler waits out --delay-ms on a timer, then writes the payment
  // and its outbox event (or finds those of an earlier run) and answers 201.
  net::awaitable<idem::Outcome<StoredResponse>> pay(const payments::PaymentRequest& p) {
    co_return co_await record_guard_.async_execute(
        idem::Key{p.key, p.principal}, p.payload, [this, &p]() -> net::awaitable<StoredResponse> {
          if (config_.handler_delay.count() > 0) {
            net::steady_timer delay(co_await net::this_coro::executor, config_.handler_delay);
            co_await delay.async_wait(net::use_awaitable);
          }
          const payments::json payment =
              co_await rows_.insert_once(payments::new_payment(p.body), p.principal, p.key);
          co_return StoredResponse{201,
                                   {{"Location", payments::payment_location(payment)},
                                    {"Content-Type", "application/json"}},
                                   payment.dump()};
        });
  }

  const payments::Config config_;
  PaymentRows rows_;
  idem::AsyncPostgresStore records_;
  idem::AsyncGuard<idem::AsyncPostgresStore> record_guard_;
  // Tokens in this process's memory, as the blocking service keeps them without Redis: there is
  // no asynchronous token store yet, and MemoryTokenStore never blocks.
  idem::MemoryTokenStore tokens_;
  idem::ImmediateStore<idem::MemoryTokenStore> token_calls_;
  idem::AsyncGuard<idem::ImmediateStore<idem::MemoryTokenStore>> token_guard_;
};

PaymentsRoutes::PaymentsRoutes(const net::any_io_executor& executor, const payments::Config& config)
    : impl_(std::make_unique<Impl>(executor, config)) {}

PaymentsRoutes::~PaymentsRoutes() = default;

net::awaitable<HttpResponse> PaymentsRoutes::handle(const HttpRequest& request) {
  return impl_->handle(request);
}

}  // namespace payments_async
