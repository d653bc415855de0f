#pragma once
// Client-side bounds on PostgreSQL round trips. libpq waits for a reply as long as the socket
// stays open, and on a silent network (a crashed host, a dropped NAT flow, a firewall eating
// packets) that is until TCP gives up, minutes later; statement_timeout cannot help, since the
// server never sees the statement. A session arms a deadline before each blocking round trip and
// disarms it after; the watchdog shuts down (shutdown(2)) the socket of a connection still
// waiting at its deadline, so that libpq's blocked read fails at once, and the pool drops the
// connection. One thread per watchdog, asleep on a condition variable until the earliest
// deadline.

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

namespace idem::postgres::detail {

class ReplyWatchdog {
 public:
  using Clock = std::chrono::steady_clock;

  /// One connection's place on the watchdog. Holds a duplicate of the connection's socket, so
  /// that a shutdown never reaches another socket that reuses the number after libpq closed its
  /// own descriptor; close the connection after this (declare it first).
  class Watch {
   public:
    /// `socket`: the connection's (PQsocket). A watch on an invalid socket never fires.
    Watch(ReplyWatchdog& watchdog, int socket) noexcept;
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;
    ~Watch();

    /// The connection's reply is due within `budget` from now (re-arming moves the deadline).
    void arm(std::chrono::milliseconds budget);
    /// No reply is awaited any more; true when the deadline passed first and the connection
    /// was shut down.
    bool disarm() noexcept;
    /// Whether the watchdog has shut the connection down.
    bool fired() const noexcept;

   private:
    friend class ReplyWatchdog;
    ReplyWatchdog& watchdog_;
    int socket_ = -1;  // the duplicate
    bool armed_ = false;
    bool fired_ = false;
    std::multimap<Clock::time_point, Watch*>::iterator at_{};
  };

  ReplyWatchdog();
  ReplyWatchdog(const ReplyWatchdog&) = delete;
  ReplyWatchdog& operator=(const ReplyWatchdog&) = delete;
  /// Every Watch must be gone first.
  ~ReplyWatchdog();

 private:
  void run();

  mutable std::mutex mutex_;  // guards everything below and every Watch's state
  std::condition_variable changed_;
  std::multimap<Clock::time_point, Watch*> armed_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the rest is ready
};

}  // namespace idem::postgres::detail
