#include "postgres/reply_watchdog.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace idem::postgres::detail {

ReplyWatchdog::Watch::Watch(ReplyWatchdog& watchdog, int socket) noexcept
    : watchdog_(watchdog), socket_(socket < 0 ? -1 : ::fcntl(socket, F_DUPFD_CLOEXEC, 0)) {}

ReplyWatchdog::Watch::~Watch() {
  disarm();
  if (socket_ >= 0) ::close(socket_);
}

void ReplyWatchdog::Watch::arm(std::chrono::milliseconds budget) {
  if (socket_ < 0) return;
  const auto deadline = Clock::now() + budget;
  std::lock_guard lock(watchdog_.mutex_);
  if (fired_) return;  // shut down already: the round trip fails by itself
  if (armed_) watchdog_.armed_.erase(at_);
  at_ = watchdog_.armed_.emplace(deadline, this);
  armed_ = true;
  if (at_ == watchdog_.armed_.begin()) watchdog_.changed_.notify_one();  // a new earliest
}

bool ReplyWatchdog::Watch::disarm() noexcept {
  std::lock_guard lock(watchdog_.mutex_);
  if (armed_) watchdog_.armed_.erase(at_);
  armed_ = false;
  return fired_;
}

bool ReplyWatchdog::Watch::fired() const noexcept {
  std::lock_guard lock(watchdog_.mutex_);
  return fired_;
}

ReplyWatchdog::ReplyWatchdog() : thread_([this] { run(); }) {}

ReplyWatchdog::~ReplyWatchdog() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_one();
  thread_.join();
}

void ReplyWatchdog::run() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    if (armed_.empty()) {
      changed_.wait(lock);
      continue;
    }
    const auto first = armed_.begin();
    const Clock::time_point earliest = first->first;  // a copy: disarm() may erase the entry
    if (earliest > Clock::now()) {
      changed_.wait_until(lock, earliest);
      continue;
    }
    Watch& overdue = *first->second;
    armed_.erase(first);
    overdue.armed_ = false;
    overdue.fired_ = true;
    // Both directions: the blocked read sees the connection closed, and so does the server.
    ::shutdown(overdue.socket_, SHUT_RDWR);
  }
}

}  // namespace idem::postgres::detail
