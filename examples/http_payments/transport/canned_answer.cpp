#include "transport/canned_answer.hpp"

#include <sys/socket.h>

#include "problem_body.hpp"
#include "transport/http_text.hpp"

namespace transport {

Refusal timeout_refusal(const TransportSettings& settings) {
  return {408, "Request Timeout", "request_timeout",
          "the request did not arrive whole within " +
              std::to_string(settings.request_timeout.count()) + " ms"};
}

Refusal busy_refusal(const TransportSettings& settings) {
  return {503, "Service Unavailable", "too_many_connections",
          "the server has " + std::to_string(settings.max_connections) +
              " connections open; retry later"};
}

std::string canned_answer(const Refusal& refusal) {
  const std::string body = payments::problem_body(refusal.status, refusal.type,
                                                  std::string(refusal.reason), refusal.detail);
  std::string out = "HTTP/1.1 " + std::to_string(refusal.status) + " ";
  out += refusal.reason;
  out += "\r\nDate: " + http_date() +
         "\r\nContent-Type: application/problem+json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  out += body;
  return out;
}

void send_canned_answer(int fd, const Refusal& refusal) {
  const std::string bytes = canned_answer(refusal);
  [[maybe_unused]] const auto sent =
      ::send(fd, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

}  // namespace transport
