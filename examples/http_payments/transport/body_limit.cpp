#include "transport/body_limit.hpp"

#include <charconv>
#include <string>

#include "problem_json.hpp"

namespace transport {

namespace {

bool over(const httplib::Request& req, std::size_t limit) {
  const std::string length = req.get_header_value("Content-Length");
  std::size_t n = 0;
  const auto [end, ec] = std::from_chars(length.data(), length.data() + length.size(), n);
  // A length too large to parse is over any limit.
  return ec == std::errc::result_out_of_range || (ec == std::errc{} && n > limit);
}

void too_large(httplib::Response& res, std::size_t limit) {
  payments::problem(res, 413, "body_too_large", "Request body too large",
                    "the body may hold at most " + std::to_string(limit) + " bytes");
  res.set_header("Connection", "close");
}

}  // namespace

void limit_bodies(httplib::Server& server, std::size_t limit) {
  server.set_payload_max_length(limit);
  server.set_pre_routing_handler([limit](const httplib::Request& req, httplib::Response& res) {
    if (!over(req, limit)) return httplib::Server::HandlerResponse::Unhandled;
    too_large(res, limit);
    return httplib::Server::HandlerResponse::Handled;
  });
  // Expect: 100-continue is answered before routing: refuse there, and the body is never sent.
  server.set_expect_100_continue_handler(
      [limit](const httplib::Request& req, httplib::Response& res) {
        if (!over(req, limit)) return 100;
        too_large(res, limit);
        return 413;
      });
}

}  // namespace transport
