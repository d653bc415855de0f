#pragma once
// What POST /payments carries, read and checked the same way by every server of the payments
// service (the blocking one on cpp-httplib, its bare twin, the asynchronous one on Beast): 401
// without a bearer name, 400 for a missing or malformed Idempotency-Key or a body that is not a
// payment. And the payment a handler makes of it. Transport-neutral: headers and body come in as
// strings, a refusal goes out as a problem document's parts.

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "idem/http/idempotency_key.hpp"
#include "request_headers.hpp"

namespace payments {

using json = nlohmann::json;

struct PaymentRequest {
  std::string principal;
  std::string key;
  json body;
  std::string payload;  // the body in canonical form: whitespace and key order do not matter
};

/// A request refused before any store sees it: the problem document's parts. A 401 goes out
/// with WWW-Authenticate: Bearer.
struct Refusal {
  int status;
  std::string_view type;
  std::string title;
  std::string detail;
};

inline Refusal unauthorized_refusal() {
  return {401, "unauthorized", "Missing credentials",
          "send Authorization: Bearer <name> (demo authentication)"};
}

/// The request, or why it is refused. The arguments are the Authorization header (empty when
/// absent), the value of every Idempotency-Key field in the order received (two are refused: the
/// key is one sf-string) and the body.
inline std::variant<PaymentRequest, Refusal> check_payment_request(
    std::string_view authorization, const std::vector<std::string_view>& key_fields,
    std::string_view body_text) {
  std::optional<std::string> principal = bearer_principal(authorization);
  if (!principal) return unauthorized_refusal();
  idem::http::ParsedKey parsed = idem::http::parse_idempotency_key_fields(key_fields);
  if (!parsed) {
    return Refusal{
        400, "key_invalid", std::string(parsed.reason()),
        "POST /payments needs one Idempotency-Key header: a quoted string (parameters after "
        "it are ignored) or printable ASCII, at most 255 bytes"};
  }
  json body = json::parse(body_text, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object() || !body.contains("amount") || !body["amount"].is_number_integer() ||
      body["amount"].get<long long>() <= 0 || !body.contains("currency") ||
      !body["currency"].is_string() || body["currency"].get<std::string>().size() != 3) {
    return Refusal{400, "invalid_body", "Invalid payment",
                   R"(the body must be a JSON object {"amount": <positive integer>, )"
                   R"("currency": "<3 letters>"})"};
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
