#pragma once
// RFC 9457 problem documents: every error the payments service answers, from a route or from the
// transport, is application/problem+json with type urn:idem:problem:<name>, title, status and
// detail.

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

namespace payments {

inline std::string problem_body(int status, std::string_view type, std::string title,
                                std::string detail) {
  return nlohmann::json{{"type", "urn:idem:problem:" + std::string(type)},
                        {"title", std::move(title)},
                        {"status", status},
                        {"detail", std::move(detail)}}
      .dump();
}

inline void problem(httplib::Response& res, int status, std::string_view type, std::string title,
                    std::string detail) {
  res.status = status;
  res.set_content(problem_body(status, type, std::move(title), std::move(detail)),
                  "application/problem+json");
}

}  // namespace payments
