#pragma once
// What POST /payments carries, read and checked the same way by the guarded service and its bare
// twin: 401 without a bearer name, 400 for a missing or malformed Idempotency-Key or a body that
// is not a payment. And the payment a handler makes of it.

#include <httplib.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>

#include "idem/http/idempotency_key.hpp"
#include "problem_json.hpp"
#include "request_headers.hpp"

namespace payments {

using json = nlohmann::json;

struct PaymentRequest {
  std::string principal;
  std::string key;
  json body;
  std::string payload;  // the body in canonical form: whitespace and key order do not matter
};

inline void unauthorized(httplib::Response& res) {
  problem(res, 401, "unauthorized", "Missing credentials",
          "send Authorization: Bearer <name> (demo authentication)");
  res.set_header("WWW-Authenticate", "Bearer");
}

inline std::optional<std::string> principal_of(const httplib::Request& req) {
  return bearer_principal(req.get_header_value("Authorization"));
}

/// The request, or nullopt with the refusal already written to `res`.
inline std::optional<PaymentRequest> read_payment_request(const httplib::Request& req,
                                                          httplib::Response& res) {
  std::optional<std::string> principal = principal_of(req);
  if (!principal) {
    unauthorized(res);
    return std::nullopt;
  }
  idem::http::ParsedKey parsed =
      idem::http::parse_idempotency_key(req.get_header_value("Idempotency-Key"));
  if (!parsed) {
    problem(res, 400, "key_invalid", std::string(parsed.reason()),
            "POST /payments needs an Idempotency-Key header: a quoted string (parameters after "
            "it are ignored) or printable ASCII, at most 255 bytes");
    return std::nullopt;
  }
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object() || !body.contains("amount") || !body["amount"].is_number_integer() ||
      body["amount"].get<long long>() <= 0 || !body.contains("currency") ||
      !body["currency"].is_string() || body["currency"].get<std::string>().size() != 3) {
    problem(res, 400, "invalid_body", "Invalid payment",
            R"(the body must be a JSON object {"amount": <positive integer>, )"
            R"("currency": "<3 letters>"})");
    return std::nullopt;
  }
  std::string payload = body.dump();
  return PaymentRequest{std::move(*principal), std::move(parsed).take_key(), std::move(body),
                        std::move(payload)};
}

inline std::string random_payment_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return std::string("pay_") + buf;
}

/// Where a payment can be read back (GET /payments/{id}): the Location of a 201.
inline std::string payment_location(const json& payment) {
  return "/payments/" + payment["id"].get<std::string>();
}

/// The payment a handler records for a request's body.
inline json new_payment(const json& body) {
  return json{{"id", random_payment_id()},
              {"amount", body["amount"]},
              {"currency", body["currency"]},
              {"status", "succeeded"}};
}

}  // namespace payments
