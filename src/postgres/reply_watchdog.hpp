#pragma once
// Client-side bounds on PostgreSQL round trips: on a silent network libpq waits until TCP gives
// up, minutes later. The watchdog's thread shuts down (shutdown(2)) the socket of a connection
// still waiting at its deadline, so that libpq's blocked read fails at once.

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

namespace idem::postgres::detail {

class ReplyWatchdog {
 public:
  using Clock = std::chrono::steady_clock;

  /// One connection's place, with a duplicate of its socket so that a shutdown never reaches a
  /// socket that reuses the number; close the connection after this (declare it first).
  class Watch {
   public:
    Watch(ReplyWatchdog& watchdog, int socket) noexcept;  // never fires on an invalid socket
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;
    ~Watch();

    /// The connection's reply is due within `budget` from now (re-arming moves the deadline).
    void arm(std::chrono::milliseconds budget);
    /// No reply is awaited any more; true when the watchdog shut the connection down first.
    bool disarm() noexcept;
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
