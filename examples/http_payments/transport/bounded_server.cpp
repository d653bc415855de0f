#include "transport/bounded_server.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string_view>
#include <system_error>

#include "idem/http/stored_response.hpp"
#include "transport/canned_answer.hpp"
#include "transport/http_text.hpp"

namespace transport {

namespace {

// Headers the transport writes itself, from the answer it sends: a route's own are dropped.
bool framing_header(std::string_view name) {
  for (const std::string_view own :
       {"Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Date"}) {
    if (idem::http::equals_ignoring_case(name, own)) return true;
  }
  return false;
}

// The answer as bytes: status line, Date, the route's headers, Content-Length, and whether the
// connection stays open (HTTP/1.0: Connection: keep-alive when it does; either: close when not).
std::string answer_bytes(const httplib::Response& res, unsigned version, bool keep) {
  const bool has_body = res.status >= 200 && res.status != 204 && res.status != 304;
  std::string out;
  out.reserve(256 + res.body.size());
  out += "HTTP/1.1 ";
  out += std::to_string(res.status);
  out += ' ';
  out += reason_phrase(res.status);
  out += "\r\nDate: ";
  out += http_date();
  out += "\r\n";
  for (const auto& [name, value] : res.headers) {
    if (framing_header(name)) continue;
    out += name;
    out += ": ";
    out += value;
    out += "\r\n";
  }
  if (has_body) {
    out += "Content-Length: ";
    out += std::to_string(res.body.size());
    out += "\r\n";
  }
  if (!keep) {
    out += "Connection: close\r\n";
  } else if (version == 10) {
    out += "Connection: keep-alive\r\n";
  }
  out += "\r\n";
  if (has_body) out += res.body;
  return out;
}

}  // namespace

BoundedServer::BoundedServer(const TransportSettings& settings)
    : settings_(settings),
      loop_(settings, [this](Connection& c) { return answer(c); }),
      wake_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (wake_ < 0) throw std::system_error(errno, std::generic_category(), "transport: eventfd");
}

BoundedServer::~BoundedServer() {
  shut_down();
  if (listener_ >= 0) ::close(listener_);
  ::close(wake_);
}

int BoundedServer::bind(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return -1;
  int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int on = 1;
  if (fd >= 0) ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  const bool bound = fd >= 0 && ::bind(fd, found->ai_addr, found->ai_addrlen) == 0 &&
                     ::listen(fd, settings_.listen_backlog) == 0;
  ::freeaddrinfo(found);
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (!bound || ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  listener_ = fd;
  return addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                    : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

bool BoundedServer::listen_after_bind() {
  if (listener_ < 0) return false;
  running_ = true;
  while (!stopped_.load()) {
    pollfd waits[2] = {{listener_, POLLIN, 0}, {wake_, POLLIN, 0}};
    if (::poll(waits, 2, -1) < 0 && errno != EINTR) break;
    for (;;) {
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) break;  // none left now (or out of descriptors: poll again)
      if (!loop_.admit(fd)) {
        send_canned_answer(fd, busy_refusal(settings_));
        ::close(fd);
      }
    }
  }
  running_ = false;
  return true;
}

void BoundedServer::stop() {
  stopped_ = true;
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto n = ::write(wake_, &one, sizeof one);
}

bool BoundedServer::answer(Connection& c) {
  const RequestReader& reader = c.reader;
  httplib::Request req;
  req.method = reader.method();
  req.target = reader.target();
  const std::size_t query = req.target.find('?');
  req.path = req.target.substr(0, query);
  if (query != std::string::npos)
    httplib::detail::parse_query_text(req.target.substr(query + 1), req.params);
  req.version = reader.version() == 10 ? "HTTP/1.0" : "HTTP/1.1";
  reader.each_field([&req](std::string_view name, std::string_view value) {
    req.headers.emplace(std::string(name), std::string(value));
  });
  req.body = c.reader.take_body();
  req.remote_addr = c.peer_ip;
  req.remote_port = c.peer_port;
  req.local_addr = c.local_ip;
  req.local_port = c.local_port;

  httplib::Response res;
  route(req, res);
  const bool keep =
      reader.keep_alive() && c.answered + 1 < settings_.keep_alive_requests && !stopped_.load();
  c.out = answer_bytes(res, reader.version(), keep);
  return keep;
}

}  // namespace transport
