#pragma once
// RFC 9457 problem documents: every error the payments service answers, from a route or from the
// transport, is application/problem+json with type urn:idem:problem:<name>, title, status and
// detail (idem/http/problem.hpp writes the body). Transport-neutral: the blocking server
// (problem_json.hpp) and the asynchronous one both write these bodies.

#include <string>
#include <string_view>
#include <utility>

#include "idem/http/problem.hpp"

namespace payments {

inline constexpr std::string_view kProblemTypeBase = "urn:idem:problem:";

inline std::string problem_body(int status, std::string_view type, std::string title,
                                std::string detail) {
  return idem::http::problem_json({.type = std::string(kProblemTypeBase) + std::string(type),
                                   .title = std::move(title),
                                   .status = status,
                                   .detail = std::move(detail),
                                   .instance = {}});
}

}  // namespace payments
