#pragma once
// The timing decisions about one Redis server's connection, without I/O, for both faces: when a
// call and each of its waits must end, when the next connect may start after a failed one, and
// when a connection whose replies are late must go. The blocking face bounds each poll(2) by
// these deadlines; the Asio face, which has no wait of its own to bound, asks the Watchdog at a
// timer's ticks. Internal to idem_redis.

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "idem/redis/client.hpp"

namespace idem::redis {

/// When a call or a wait must be over. Deadline::max(): no bound but each wait's own option.
using Deadline = std::chrono::steady_clock::time_point;

/// One call's time, redirections and retries included: connect_timeout + command_timeout.
inline std::chrono::milliseconds call_budget(const ConnectionOptions& o) noexcept {
  return o.connect_timeout + o.command_timeout;
}

/// When a reply sent at `now` is due: within command_timeout, and by the call's `deadline`.
inline Deadline reply_by(const ConnectionOptions& o, Deadline deadline,
                         Deadline now = std::chrono::steady_clock::now()) noexcept {
  return std::min(deadline, now + o.command_timeout);
}

/// When a connect started at `now` must be done: within connect_timeout, and by `deadline`.
inline Deadline connected_by(const ConnectionOptions& o, Deadline deadline,
                             Deadline now = std::chrono::steady_clock::now()) noexcept {
  return std::min(deadline, now + o.connect_timeout);
}

/// After a failed connection, no connect starts until `initial` has passed; the pause doubles
/// after each failure up to `max`, and starts over once a connection is made. Calls meanwhile
/// fail at once: a service facing a dead server answers promptly instead of queueing.
class ReconnectBackoff {
 public:
  ReconnectBackoff(std::chrono::milliseconds initial, std::chrono::milliseconds max) noexcept
      : initial_(initial), max_(max), pause_(initial) {}

  /// How long until a connect may start; zero: now.
  std::chrono::milliseconds wait_left(Deadline now) const noexcept {
    return now < next_ ? std::chrono::ceil<std::chrono::milliseconds>(next_ - now)
                       : std::chrono::milliseconds{0};
  }
  /// A connection failed or ended (`why`, for the messages of the calls refused meanwhile).
  void failed(Deadline now, std::string why) {
    next_ = now + pause_;
    pause_ = std::min(pause_ * 2, max_);
    why_ = std::move(why);
  }
  void connected() noexcept { pause_ = initial_; }
  const std::string& why() const noexcept { return why_; }

 private:
  std::chrono::milliseconds initial_, max_, pause_;
  Deadline next_{};
  std::string why_;
};

/// A connection's timeouts checked at a timer's ticks: a connect that takes longer than
/// connect_timeout, or no reply for command_timeout while commands await theirs. Replies are
/// noted as a flag and timed at the next tick, not by a clock read each; so the verdict comes
/// within one and a half timeouts.
class Watchdog {
 public:
  explicit Watchdog(const ConnectionOptions& o) noexcept
      : connect_timeout_(o.connect_timeout), command_timeout_(o.command_timeout) {}

  /// Four ticks per the shorter timeout.
  std::chrono::milliseconds period() const noexcept {
    return std::max(std::chrono::milliseconds{1}, std::min(command_timeout_, connect_timeout_) / 4);
  }
  /// A connect starts; its handshake's replies are due from now too.
  void connecting(Deadline now) noexcept { connect_started_ = last_progress_ = now; }
  /// A command goes to a connection that awaited nothing: its reply is timed from now.
  void sent_to_idle(Deadline now) noexcept {
    blocked_until_ = {};  // nothing awaited: a blocking command sent earlier has answered
    last_progress_ = now;
  }
  /// A blocking command (BLPOP) goes out: no reply is due before `until`, its own timeout.
  void blocks_until(Deadline until) noexcept {
    blocked_until_ = std::max(blocked_until_, until);
    last_progress_ = std::max(last_progress_, until);
  }
  void replied() noexcept { replied_ = true; }

  /// At a tick: why the connection must be dropped; empty when it may stay.
  std::string overdue(Deadline now, bool connected, bool awaiting) {
    if (std::exchange(replied_, false)) last_progress_ = std::max(now, blocked_until_);
    if (!connected && now - connect_started_ > connect_timeout_) {
      return "connecting took more than " + std::to_string(connect_timeout_.count()) + " ms";
    }
    if (awaiting && now - last_progress_ > command_timeout_) {
      return "no reply within " + std::to_string(command_timeout_.count()) + " ms";
    }
    return {};
  }

 private:
  std::chrono::milliseconds connect_timeout_, command_timeout_;
  Deadline connect_started_{}, last_progress_{};
  Deadline blocked_until_{};  // the latest timeout of a blocking command sent
  bool replied_ = false;
};

}  // namespace idem::redis
