#include "transport/router.hpp"

#include <exception>
#include <utility>

#include "problem_json.hpp"

namespace transport {

void Router::get(const std::string& pattern, Handler handler) {
  routes_.push_back(Route{"GET", std::regex(pattern), std::move(handler)});
}

void Router::post(const std::string& pattern, Handler handler) {
  routes_.push_back(Route{"POST", std::regex(pattern), std::move(handler)});
}

void Router::route(httplib::Request& req, httplib::Response& res) const {
  for (const Route& r : routes_) {
    if (r.method != req.method || !std::regex_match(req.path, req.matches, r.pattern)) continue;
    try {
      r.handler(req, res);
      if (res.status == -1) res.status = 200;
    } catch (const std::exception& e) {
      res = httplib::Response{};
      payments::problem(res, 500, "handler_failed", "Request failed", e.what());
    }
    return;
  }
  payments::problem(res, 404, "not_found", "No such route", req.method + " " + req.path);
}

}  // namespace transport
