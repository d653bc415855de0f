#include "transport/canned_answer.hpp"

#include <sys/socket.h>

#include "problem_body.hpp"

namespace transport {

std::string canned_answer(int status, std::string_view reason, std::string_view type,
                          std::string_view detail) {
  const std::string body =
      payments::problem_body(status, type, std::string(reason), std::string(detail));
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) +
         "\r\nContent-Type: application/problem+json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

void send_canned_answer(int fd, int status, std::string_view reason, std::string_view type,
                        std::string_view detail) {
  const std::string bytes = canned_answer(status, reason, type, detail);
  [[maybe_unused]] const auto sent =
      ::send(fd, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

}  // namespace transport
