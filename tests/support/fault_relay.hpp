#pragma once
// A TCP relay for tests that puts network faults between a client and a server: it listens on
// 127.0.0.1 (port 0, read back with port()) and forwards every connection to host:port. The
// fault can be switched at any time, connections open or not:
//   pass()      forward both ways;
//   delay(d)    forward each chunk d after it was read (order kept);
//   stall()     read from both sides and forward nothing, connections left open: a silent
//               network (a crashed host, a forgotten NAT flow, a firewall dropping packets);
//               what is read meanwhile is lost, so a stalled connection is of no use afterwards;
//   hold()      read from neither side, connections left open: the bytes wait in the kernel's
//               buffers and flow again after pass();
//   cut()       close every open connection now (new ones are still accepted);
//   refuse(on)  close every new connection as soon as it is accepted.
// And one-shot faults on the next client chunk a predicate picks (or the next `times` chunks):
//   lose_reply_after(p)  forward the chunk to the server, then cut the connection before any
//                        byte of the server's reply reaches the client (the server still gets
//                        to answer: a reply lost on the way back);
//   cut_before(p)        cut the connection without forwarding the chunk.
// Counters: connections accepted, bytes forwarded each way. The destructor closes everything
// and joins every thread, whatever the fault.

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "support/free_port.hpp"

namespace idem::testing {

class FaultRelay {
 public:
  using Clock = std::chrono::steady_clock;
  using ChunkPredicate = std::function<bool(std::string_view chunk)>;

  /// Listens at once; throws std::runtime_error when it cannot.
  FaultRelay(std::string host, int port) : host_(std::move(host)), port_(port) {
    const LoopbackListener listening = listen_on_loopback(64);
    listener_ = listening.fd;
    if (listener_ < 0 || ::pipe(accept_wake_) != 0) {
      if (listener_ >= 0) ::close(listener_);
      throw std::runtime_error("fault relay: cannot listen on 127.0.0.1");
    }
    listen_port_ = listening.port;
    accept_thread_ = std::thread([this] { accept_loop(); });
  }
  FaultRelay(const FaultRelay&) = delete;
  FaultRelay& operator=(const FaultRelay&) = delete;

  ~FaultRelay() {
    stop_ = true;
    wake_byte(accept_wake_[1]);
    accept_thread_.join();  // no connection is added after this
    cut();                  // also ends a write blocked on a peer that does not read
    for (auto& t : connection_threads_) t.join();
    ::close(listener_);
    ::close(accept_wake_[0]);
    ::close(accept_wake_[1]);
  }

  int port() const { return listen_port_; }

  void pass() { set_mode(Mode::pass, {}); }
  void delay(std::chrono::milliseconds d) { set_mode(Mode::delay, d); }
  void stall() { set_mode(Mode::stall, {}); }
  void hold() { set_mode(Mode::hold, {}); }

  /// Closes every open connection now; both ends see the connection closed.
  void cut() {
    std::lock_guard lock(mutex_);
    for (auto& c : connections_) c->cut();
  }

  /// While on, a new connection is closed as soon as it is accepted.
  void refuse(bool on = true) { refuse_ = on; }

  /// One shot: the next client chunk `chunk_matches` picks goes to the server, then that
  /// connection is cut; the server's reply is read and dropped, never reaching the client.
  /// `times`: so for each of the next `times` chunks it picks.
  void lose_reply_after(ChunkPredicate chunk_matches, int times = 1) {
    std::lock_guard lock(mutex_);
    one_shot_ = {std::move(chunk_matches), OneShot::Kind::lose_reply, times};
  }

  /// One shot: as lose_reply_after, but the client's side is cut first and the chunk reaches the
  /// server `late` after: a message still on its way when its sender gave up.
  void lose_reply_after_late(ChunkPredicate chunk_matches, std::chrono::milliseconds late) {
    std::lock_guard lock(mutex_);
    one_shot_ = {std::move(chunk_matches), OneShot::Kind::lose_reply, 1, late};
  }

  /// One shot: the next client chunk `chunk_matches` picks is dropped and its connection cut.
  /// `times`: so for each of the next `times` chunks it picks.
  void cut_before(ChunkPredicate chunk_matches, int times = 1) {
    std::lock_guard lock(mutex_);
    one_shot_ = {std::move(chunk_matches), OneShot::Kind::cut_before, times};
  }

  /// A predicate for the two above: the chunk holds `needle`.
  static ChunkPredicate contains(std::string needle) {
    return [needle = std::move(needle)](std::string_view chunk) {
      return chunk.find(needle) != std::string_view::npos;
    };
  }

  /// Whether the last one-shot fault armed has fired (every time it was armed for).
  bool one_shot_fired() const {
    std::lock_guard lock(mutex_);
    return !one_shot_.chunk_matches;
  }

  long long accepted() const { return accepted_.load(); }
  long long bytes_to_server() const { return to_server_.load(); }
  long long bytes_to_client() const { return to_client_.load(); }
  /// Connections accepted and not closed yet.
  long long open_connections() const {
    std::lock_guard lock(mutex_);
    return static_cast<long long>(connections_.size());
  }

 private:
  enum class Mode { pass, delay, stall, hold };

  struct OneShot {
    enum class Kind { lose_reply, cut_before };
    ChunkPredicate chunk_matches;  // empty: none armed
    Kind kind = Kind::lose_reply;
    int left = 1;                       // chunks it still applies to
    std::chrono::milliseconds late{0};  // lose_reply: the chunk reaches the server this late
  };

  // One relayed connection: the client's socket, the server's, and a pipe that wakes its thread
  // (a fault switched, a cut, the relay stopping).
  struct Connection {
    int client = -1;
    int server = -1;
    int wake_pipe[2] = {-1, -1};
    std::atomic<bool> cut_now{false};

    Connection(int c, int s) : client(c), server(s) {
      if (::pipe(wake_pipe) != 0) throw std::runtime_error("fault relay: no pipe");
    }
    ~Connection() {
      for (int fd : {client, server, wake_pipe[0], wake_pipe[1]}) {
        if (fd >= 0) ::close(fd);
      }
    }
    void wake() { wake_byte(wake_pipe[1]); }
    // Shut down now, from any thread, so that both peers see the connection closed even while
    // the relay's thread is not reading; that thread closes the descriptors.
    void cut() {
      cut_now = true;
      ::shutdown(client, SHUT_RDWR);
      ::shutdown(server, SHUT_RDWR);
      wake();
    }
  };

  // Bytes read from one side and not written to the other yet, each chunk with its due time.
  struct Pending {
    Clock::time_point due;
    std::string bytes;
  };

  static void wake_byte(int fd) {
    const char b = 1;
    (void)!::write(fd, &b, 1);
  }
  static void drain(int fd) {
    char buf[256];
    while (true) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0 || ::read(fd, buf, sizeof buf) <= 0) return;
    }
  }
  static bool write_all(int fd, const char* data, std::size_t n) {
    while (n > 0) {
      const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
      if (w <= 0) return false;
      data += w;
      n -= static_cast<std::size_t>(w);
    }
    return true;
  }

  void set_mode(Mode mode, std::chrono::milliseconds d) {
    std::lock_guard lock(mutex_);
    mode_ = mode;
    delay_ = d;
    for (auto& c : connections_) c->wake();
  }

  std::pair<Mode, std::chrono::milliseconds> current_fault() const {
    std::lock_guard lock(mutex_);
    return {mode_, delay_};
  }

  int connect_upstream() const {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host_.c_str(), std::to_string(port_).c_str(), &hints, &found) != 0) {
      return -1;
    }
    int fd = -1;
    for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
      fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        ::close(fd);
        fd = -1;
      }
    }
    ::freeaddrinfo(found);
    return fd;
  }

  void accept_loop() {
    while (!stop_) {
      pollfd p[2] = {{listener_, POLLIN, 0}, {accept_wake_[0], POLLIN, 0}};
      if (::poll(p, 2, -1) <= 0 || stop_) continue;
      if ((p[0].revents & POLLIN) == 0) continue;
      const int client = ::accept(listener_, nullptr, nullptr);
      if (client < 0) continue;
      ++accepted_;
      if (refuse_) {
        ::close(client);
        continue;
      }
      const int server = connect_upstream();
      if (server < 0) {
        ::close(client);
        continue;
      }
      auto connection = std::make_shared<Connection>(client, server);
      std::lock_guard lock(mutex_);
      connections_.push_back(connection);
      connection_threads_.emplace_back([this, connection] { relay(connection); });
    }
  }

  // The fault to apply to a chunk the client sent: none, or the one-shot fault it triggers
  // (its kind, and how late a lost reply's chunk reaches the server).
  std::optional<std::pair<OneShot::Kind, std::chrono::milliseconds>> take_one_shot(
      std::string_view chunk) {
    std::lock_guard lock(mutex_);
    if (!one_shot_.chunk_matches || !one_shot_.chunk_matches(chunk)) return std::nullopt;
    if (--one_shot_.left <= 0) one_shot_.chunk_matches = nullptr;
    return std::pair{one_shot_.kind, one_shot_.late};
  }

  void relay(const std::shared_ptr<Connection>& c) {
    std::deque<Pending> to_server;
    std::deque<Pending> to_client;
    char chunk[65536];
    bool lose_reply = false;  // the client is gone; wait for the server's reply, then close
    Clock::time_point lose_reply_until{};
    while (!stop_ && !c->cut_now) {
      auto [mode, d] = current_fault();
      const auto now = Clock::now();
      // Write what is due, unless the network is silent or frozen.
      if (mode != Mode::hold && !lose_reply) {
        bool ok = true;
        for (auto* q : {&to_server, &to_client}) {
          const int fd = q == &to_server ? c->server : c->client;
          auto& counter = q == &to_server ? to_server_ : to_client_;
          while (ok && !q->empty() && (mode == Mode::stall || q->front().due <= now)) {
            if (mode != Mode::stall) {
              ok = write_all(fd, q->front().bytes.data(), q->front().bytes.size());
              counter += static_cast<long long>(q->front().bytes.size());
            }
            q->pop_front();
          }
        }
        if (!ok) break;
      }
      if (lose_reply && now >= lose_reply_until) break;

      // Wait for bytes (not in hold), a wake-up, or the next due chunk.
      int timeout_ms = -1;
      auto earliest = Clock::time_point::max();
      if (mode != Mode::hold && !lose_reply) {
        for (auto* q : {&to_server, &to_client}) {
          if (!q->empty()) earliest = std::min(earliest, q->front().due);
        }
      }
      if (lose_reply) earliest = lose_reply_until;
      if (earliest != Clock::time_point::max()) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(earliest - now);
        timeout_ms = static_cast<int>(std::max<long long>(0, left.count()));
      }
      const short read_events = mode == Mode::hold ? 0 : POLLIN;
      pollfd p[3] = {{c->wake_pipe[0], POLLIN, 0},
                     {lose_reply ? -1 : c->client, read_events, 0},  // -1: not watched
                     {c->server, read_events, 0}};
      if (::poll(p, 3, timeout_ms) < 0) break;
      if (p[0].revents != 0) drain(c->wake_pipe[0]);
      if (stop_ || c->cut_now) break;
      // A closed peer shows in poll even when not reading (hold): the connection ends.
      if ((p[1].revents & (POLLHUP | POLLERR)) != 0 && (p[1].revents & POLLIN) == 0) break;
      if ((p[2].revents & (POLLHUP | POLLERR)) != 0 && (p[2].revents & POLLIN) == 0) break;

      // The fault is read again after each read: bytes sent after a switch get the new fault.
      if ((p[1].revents & POLLIN) != 0) {
        const ssize_t n = ::read(c->client, chunk, sizeof chunk);
        if (n <= 0) break;
        std::tie(mode, d) = current_fault();
        const std::string_view bytes(chunk, static_cast<std::size_t>(n));
        if (mode == Mode::stall) continue;  // lost
        const auto fault = take_one_shot(bytes);
        if (fault && fault->first == OneShot::Kind::cut_before) break;
        if (fault && fault->first == OneShot::Kind::lose_reply) {
          if (fault->second.count() > 0) {
            // The sender learns at once; its message is still on its way.
            ::shutdown(c->client, SHUT_RDWR);
            std::this_thread::sleep_for(fault->second);
          }
          // Everything before it first, then the chunk itself, at once.
          bool ok = true;
          for (auto& pending : to_server) {
            ok = ok && write_all(c->server, pending.bytes.data(), pending.bytes.size());
          }
          to_server.clear();
          ok = ok && write_all(c->server, bytes.data(), bytes.size());
          to_server_ += static_cast<long long>(bytes.size());
          ::shutdown(c->client, SHUT_RDWR);
          if (!ok) break;
          lose_reply = true;
          lose_reply_until = Clock::now() + std::chrono::seconds(5);
          to_client.clear();
          continue;
        }
        const auto due = mode == Mode::delay ? Clock::now() + d : Clock::now();
        to_server.push_back({due, std::string(bytes)});
      }
      if ((p[2].revents & POLLIN) != 0) {
        const ssize_t n = ::read(c->server, chunk, sizeof chunk);
        if (n <= 0) break;
        std::tie(mode, d) = current_fault();
        if (lose_reply) break;  // the server has answered: the reply is dropped with the connection
        if (mode == Mode::stall) continue;  // lost
        const auto due = mode == Mode::delay ? Clock::now() + d : Clock::now();
        to_client.push_back({due, std::string(chunk, static_cast<std::size_t>(n))});
      }
    }
    ::shutdown(c->client, SHUT_RDWR);
    ::shutdown(c->server, SHUT_RDWR);
    std::lock_guard lock(mutex_);
    connections_.erase(std::find(connections_.begin(), connections_.end(), c));
  }

  std::string host_;
  int port_;
  int listener_ = -1;
  int listen_port_ = 0;
  int accept_wake_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  std::atomic<bool> refuse_{false};
  std::atomic<long long> accepted_{0};
  std::atomic<long long> to_server_{0};
  std::atomic<long long> to_client_{0};

  mutable std::mutex mutex_;  // guards everything below
  Mode mode_ = Mode::pass;
  std::chrono::milliseconds delay_{0};
  OneShot one_shot_;
  std::vector<std::shared_ptr<Connection>> connections_;  // open ones
  std::vector<std::thread> connection_threads_;           // added by the accept thread only
  std::thread accept_thread_;
};

}  // namespace idem::testing
