#pragma once
// The routes the guarded service and its bare twin share: GET /health and GET /payments/{id}.

#include <httplib.h>

#include <optional>
#include <string>

#include "payment_request.hpp"
#include "payments_database.hpp"
#include "problem_json.hpp"
#include "transport/router.hpp"

namespace payments {

inline void mount_common_routes(transport::Router& server, Database& db) {
  server.get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  server.get(R"(/payments/([A-Za-z0-9_]+))",
             [&db](const httplib::Request& req, httplib::Response& res) {
               const std::optional<std::string> principal = principal_of(req);
               if (!principal) return unauthorized(res);
               std::optional<json> p = db.find(req.matches[1], *principal);
               if (!p) return problem(res, 404, "not_found", "No such payment", req.matches[1]);
               res.set_content(p->dump(), "application/json");
             });
}

}  // namespace payments
