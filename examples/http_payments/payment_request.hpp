#pragma once
// A payment request (payment_checks.hpp) read from a cpp-httplib request, its refusal written
// to the response.

#include <httplib.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "payment_checks.hpp"
#include "problem_json.hpp"

namespace payments {

inline void refuse(httplib::Response& res, const Refusal& r) {
  problem(res, r.status, r.type, r.title, r.detail);
  if (r.status == 401) res.set_header("WWW-Authenticate", "Bearer");
}

inline void unauthorized(httplib::Response& res) { refuse(res, unauthorized_refusal()); }

inline std::optional<std::string> principal_of(const httplib::Request& req) {
  return bearer_principal(req.get_header_value("Authorization"));
}

/// The request, or nullopt with the refusal already written to `res`.
inline std::optional<PaymentRequest> read_payment_request(const httplib::Request& req,
                                                          httplib::Response& res) {
  std::vector<std::string_view> keys;
  const auto [first, last] = req.headers.equal_range("Idempotency-Key");
  for (auto it = first; it != last; ++it) keys.emplace_back(it->second);
  std::variant<PaymentRequest, Refusal> r =
      check_payment_request(req.get_header_value("Authorization"), keys, req.body);
  if (auto* refusal = std::get_if<Refusal>(&r)) {
    refuse(res, *refusal);
    return std::nullopt;
  }
  return std::move(std::get<PaymentRequest>(r));
}

}  // namespace payments
