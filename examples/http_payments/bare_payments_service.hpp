#pragma once
// The bare twin of the payments service (http_payments --bare): the same routes reading and
// checking requests the same way, and the same inserts, with every idempotency layer off. A
// repeated Idempotency-Key pays again. It exists so that a benchmark run beside the service
// reads the guard's cost on an HTTP request as a ratio. No /tokens: tokens are a layer.

#include <httplib.h>

#include <chrono>
#include <exception>
#include <optional>
#include <thread>

#include "common_routes.hpp"
#include "payment_request.hpp"
#include "payments_database.hpp"
#include "payments_service.hpp"
#include "problem_json.hpp"
#include "transport/router.hpp"

namespace payments {

class BarePaymentsService final : public Service {
 public:
  BarePaymentsService(Database& db, std::chrono::milliseconds delay) : db_(db), delay_(delay) {}

  void mount(transport::Router& server) override {
    mount_common_routes(server, db_);
    server.post("/payments", [this](const httplib::Request& req, httplib::Response& res) {
      std::optional<PaymentRequest> r = read_payment_request(req, res);
      if (!r) return;
      try {
        if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
        const json payment = new_payment(r->body);
        db_.insert_alone(payment, r->principal, r->key);
        res.status = 201;
        res.set_header("Location", payment_location(payment));
        res.set_content(payment.dump(), "application/json");
      } catch (const std::exception& e) {
        problem(res, 503, "store_unavailable", "Payment not recorded", e.what());
      }
    });
  }

 private:
  Database& db_;
  std::chrono::milliseconds delay_;
};

}  // namespace payments
