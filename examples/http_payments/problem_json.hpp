#pragma once
// Problem documents (problem_body.hpp) as cpp-httplib answers.

#include <httplib.h>

#include <string>
#include <string_view>
#include <utility>

#include "problem_body.hpp"

namespace payments {

inline void problem(httplib::Response& res, int status, std::string_view type, std::string title,
                    std::string detail) {
  res.status = status;
  res.set_content(problem_body(status, type, std::move(title), std::move(detail)),
                  std::string(idem::http::kProblemContentType));
}

}  // namespace payments
