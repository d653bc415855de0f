#pragma once
// What the engine's tests share: an upstream the test runs (a small Beast server on a thread of
// its own, counting the requests it is sent), a blocking HTTP client that sends raw bytes, and
// the proxy itself (run_proxy on a thread, stopped by SIGTERM as a deployment stops it).

#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "proxy_config.hpp"
#include "run_proxy.hpp"

namespace proxy_test {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using namespace std::chrono_literals;

/// The upstream: answers by path.
///  /slow...   : waits slow_ms (default 300) first;  ...fail... : 503 "upstream down";
///  /big...    : 201 with a body of big_bytes bytes ('b');  /chunked-big: the same, chunked;
///  /silent... : never answers (the proxy's response_timeout ends it);
///  otherwise  : 201, body "done N" (N: this path's count), X-Upstream: yes, and the hop-by-hop
///               fields Keep-Alive and X-Hop (named by Connection), which the proxy drops.
class Upstream {
 public:
  Upstream() : acceptor_(io_, net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)) {
    port_ = acceptor_.local_endpoint().port();
    net::co_spawn(io_, accept_loop(), net::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Upstream() {
    io_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  /// Requests received whole on `path` (any path: "").
  int count(const std::string& path = "") {
    std::lock_guard lock(mutex_);
    if (path.empty()) return total_;
    return counts_[path];
  }
  std::string last_body() {
    std::lock_guard lock(mutex_);
    return last_body_;
  }
  /// The value of field `name` in the last request received whole, or "(none)".
  std::string last_header(const std::string& name) {
    std::lock_guard lock(mutex_);
    const auto it = last_headers_.find(name);
    return it == last_headers_.end() ? std::string("(none)") : it->second;
  }
  /// Connections accepted.
  int connections() const { return connections_.load(); }
  std::atomic<int> slow_ms{300};
  std::atomic<std::size_t> big_bytes{10000};

 private:
  net::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(net::as_tuple(net::use_awaitable));
      if (ec) co_return;
      ++connections_;
      net::co_spawn(io_, serve(std::move(socket)), net::detached);
    }
  }
  net::awaitable<void> serve(net::ip::tcp::socket socket) {
    beast::flat_buffer buffer;
    for (;;) {
      http::request<http::string_body> req;
      auto [ec, n] =
          co_await http::async_read(socket, buffer, req, net::as_tuple(net::use_awaitable));
      if (ec) co_return;
      const std::string path(req.target().substr(0, req.target().find('?')));
      int nth = 0;
      {
        std::lock_guard lock(mutex_);
        ++total_;
        nth = ++counts_[path];
        last_body_ = req.body();
        last_headers_.clear();
        for (const auto& f : req) {
          last_headers_[std::string(f.name_string())] = std::string(f.value());
        }
      }
      if (path.starts_with("/silent")) {
        net::steady_timer t(socket.get_executor(), 60s);
        co_await t.async_wait(net::as_tuple(net::use_awaitable));
        co_return;
      }
      if (path.starts_with("/slow")) {
        net::steady_timer t(socket.get_executor(), std::chrono::milliseconds(slow_ms.load()));
        co_await t.async_wait(net::as_tuple(net::use_awaitable));
      }
      http::response<http::string_body> res{http::status::created, req.version()};
      res.set("Content-Type", "text/plain");
      if (path.find("fail") != std::string::npos) {
        res.result(http::status::service_unavailable);
        res.body() = "upstream down";
      } else if (path.starts_with("/big") || path.starts_with("/chunked-big")) {
        res.body() = std::string(big_bytes.load(), 'b');
      } else {
        res.set("X-Upstream", "yes");
        res.set("Keep-Alive", "timeout=5");
        res.set("X-Hop", "drop me");
        res.set("Connection", "X-Hop");
        res.body() = "done " + std::to_string(nth);
      }
      res.keep_alive(req.keep_alive());
      if (path.starts_with("/chunked-big")) {
        res.chunked(true);
      } else {
        res.prepare_payload();
      }
      auto [wec, wn] = co_await http::async_write(socket, res, net::as_tuple(net::use_awaitable));
      if (wec || !req.keep_alive()) co_return;
    }
  }

  net::io_context io_;
  net::ip::tcp::acceptor acceptor_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::map<std::string, int> counts_;
  int total_ = 0;
  std::string last_body_;
  std::map<std::string, std::string> last_headers_;
  std::atomic<int> connections_{0};
};

/// An answer as the client read it.
struct Reply {
  int status = 0;                              // 0: no answer (the connection ended first)
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string header(const std::string& lower_name) const {
    const auto it = headers.find(lower_name);
    return it == headers.end() ? std::string{} : it->second;
  }
};

/// Sends `raw` on a new connection to 127.0.0.1:port and reads one answer (10 s at most).
inline Reply send_raw(int port, const std::string& raw) {
  net::io_context io;
  net::ip::tcp::socket socket(io);
  socket.connect(net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"),
                                        static_cast<unsigned short>(port)));
  timeval tv{10, 0};
  ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  net::write(socket, net::buffer(raw));
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  boost::system::error_code ec;
  http::read(socket, buffer, parser, ec);
  Reply r;
  if (ec) return r;
  r.status = static_cast<int>(parser.get().result_int());
  for (const auto& f : parser.get()) {
    std::string name(f.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[name] = std::string(f.value());
  }
  r.body = parser.get().body();
  return r;
}

/// A request's bytes: `method path`, Host, the Idempotency-Key when not empty, `extra` header
/// lines (each ending CRLF) and a body with its Content-Length.
inline std::string request(const std::string& method, const std::string& path,
                           const std::string& key, const std::string& body = "",
                           const std::string& extra = "") {
  std::string out = method + " " + path + " HTTP/1.1\r\nHost: proxy.test\r\n";
  if (!key.empty()) out += "Idempotency-Key: \"" + key + "\"\r\n";
  out += extra;
  out += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
  return out;
}

/// A config for the upstream on `upstream_port`, a SQLite store in `dir`, guarded routes
/// POST /payments, /slow, /fail, /slow-fail, /big, /chunked-big, /silent
/// (required) and POST /orders/* (honoured), and free ports.
inline idem::proxy::ProxyConfig config_for(int upstream_port, const std::filesystem::path& dir) {
  idem::proxy::ProxyConfig c;
  c.listen.port = 0;
  c.upstream.port = upstream_port;
  c.upstream.response_timeout = 5000ms;
  c.store.uri = "sqlite://" + (dir / "records.db").string();
  using idem::proxy::KeyUse;
  c.routes = {{"POST", "/payments", KeyUse::required}, {"POST", "/slow", KeyUse::required},
              {"POST", "/fail", KeyUse::required},     {"POST", "/slow-fail", KeyUse::required},
              {"POST", "/big", KeyUse::required},      {"POST", "/chunked-big", KeyUse::required},
              {"POST", "/silent", KeyUse::required},   {"POST", "/orders/*", KeyUse::honoured}};
  c.admin.port = 0;
  return c;
}

/// A temporary folder, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "idem-proxy-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// Keeps SIGTERM registered with Asio for the whole test process, on an io_context of its own
/// that always runs: a SIGTERM that finds no proxy running (one signal stops every proxy of the
/// process at once) is taken here at once, instead of by the default action (which would end the
/// test) or by the next proxy to start (which would stop it).
inline void keep_sigterm_registered() {
  struct Keeper {
    Keeper() : work(io.get_executor()), set(io, SIGTERM) {
      std::thread([this] { io.run(); }).detach();
    }
    net::io_context io;
    net::executor_work_guard<net::io_context::executor_type> work;
    net::signal_set set;
  };
  static Keeper* keeper = new Keeper();  // never destroyed: its thread runs to the process's end
  (void)keeper;
}

/// run_proxy(config) on a thread; its stdout lines give the ports. stop() sends SIGTERM to this
/// process (run_proxy's signal set takes it: every proxy of the process stops) and returns
/// run_proxy's exit code.
class Proxy {
 public:
  explicit Proxy(idem::proxy::ProxyConfig config) : config_(std::move(config)) {
    keep_sigterm_registered();
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    read_ = ::fdopen(fds[0], "r");
    write_ = ::fdopen(fds[1], "w");
    exit_ = std::async(std::launch::async, [this] {
      const int code = idem::proxy::run_proxy(config_, write_);
      std::fclose(write_);
      return code;
    });
    listen_port_ = port_of(line());
    if (config_.admin.port >= 0) admin_port_ = port_of(line());
  }
  ~Proxy() {
    if (!stopped_) stop();
    std::fclose(read_);
  }
  int port() const { return listen_port_; }
  int admin_port() const { return admin_port_; }
  const std::string& first_line() const { return first_line_; }
  /// SIGTERM, then run_proxy's exit code.
  int stop() {
    stopped_ = true;
    if (listen_port_ > 0 && exit_.wait_for(std::chrono::seconds{0}) != std::future_status::ready) {
      ::kill(::getpid(), SIGTERM);
    }
    return exit_.get();
  }

 private:
  std::string line() {
    char buf[512];
    if (std::fgets(buf, sizeof buf, read_) == nullptr) return {};
    std::string l(buf);
    if (first_line_.empty()) first_line_ = l;
    return l;
  }
  static int port_of(const std::string& line) {
    const auto colon = line.rfind(':');
    return colon == std::string::npos ? -1 : std::atoi(line.c_str() + colon + 1);
  }

  idem::proxy::ProxyConfig config_;
  std::FILE* read_ = nullptr;
  std::FILE* write_ = nullptr;
  std::future<int> exit_;
  int listen_port_ = -1;
  int admin_port_ = -1;
  bool stopped_ = false;
  std::string first_line_;
};

}  // namespace proxy_test
