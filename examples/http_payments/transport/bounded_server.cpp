#include "transport/bounded_server.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>

#include "transport/body_limit.hpp"
#include "transport/canned_answer.hpp"
#include "transport/request_head.hpp"
#include "transport/request_stream.hpp"

namespace transport {

namespace {

// httplib runs each accepted socket through a task queue; the loop takes it at once, so the
// accept thread does it itself instead of waking a thread for it.
class OnAcceptThread final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

}  // namespace

BoundedServer::BoundedServer(const TransportSettings& settings)
    : settings_(settings), loop_(settings, [this](Connection& c) { return answer(c); }) {
  new_task_queue = [] { return new OnAcceptThread; };
  set_tcp_nodelay(true);
  // Only what httplib writes in its Keep-Alive header: the loop applies these.
  set_keep_alive_timeout(
      std::chrono::duration_cast<std::chrono::seconds>(settings.keep_alive_timeout).count());
  set_keep_alive_max_count(settings.keep_alive_requests);
  limit_bodies(*this, settings.body_limit);
}

BoundedServer::~BoundedServer() { shut_down(); }

int BoundedServer::bind(const std::string& host, int port) {
  if (port == 0) {
    port = bind_to_any_port(host);
  } else if (!bind_to_port(host, port)) {
    port = -1;
  }
  // Listening again only changes the backlog (cpp-httplib's is 5).
  if (port > 0) ::listen(svr_sock_, settings_.listen_backlog);
  return port;
}

bool BoundedServer::process_and_close_socket(socket_t sock) {
  if (loop_.admit(sock)) return true;
  send_canned_answer(sock, 503, "Service Unavailable", "too_many_connections",
                     "the server has " + std::to_string(settings_.max_connections) +
                         " connections open; retry later");
  ::close(sock);
  return false;
}

ConnectionLoop::After BoundedServer::answer(Connection& c) {
  // A body with a length over the limit is refused unread (body_limit.hpp); one without a length
  // is cut a little past it (chunk framing counts too).
  RequestStream stream(c, head_end(c.in), c.request_start + settings_.request_timeout,
                       settings_.write_timeout, settings_.body_limit + 64 * 1024);
  const bool last = c.answered + 1 >= settings_.keep_alive_requests;
  bool client_closes = false;
  const bool processed = process_request(
      stream, last, client_closes, [&stream](httplib::Request& req) { stream.expect_body(req); });
  const bool sent = stream.flush();  // whatever was answered, even on a failed request
  ++c.answered;
  if (!processed || !sent || !is_running()) return ConnectionLoop::After::close;
  if (stream.body_left()) return ConnectionLoop::After::linger;
  if (last || client_closes) return ConnectionLoop::After::close;
  return ConnectionLoop::After::keep;
}

}  // namespace transport
