#pragma once
// PgWaker: a PostgresStore's (or AsyncPostgresStore's) listener for the wakes of held records
// (LISTEN on the records' wake channel), and the callers that wait for one: blocking callers in
// wait(), asynchronous ones through a watch (a callback from the listener's thread) and over().
//
// One connection per store, on a thread of its own, hears every wake and hands each to the
// waiters of its record: a connection per waiting caller would hold a server backend per
// duplicate (31 duplicates, 31 backends) and make every NOTIFY deliver to each of them.

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace idem::postgres::detail {

class PgWaker {
 public:
  using Clock = std::chrono::steady_clock;

  /// Where the listener stands: how many wakes it heard, and on which of its connections.
  struct Mark {
    std::uint64_t heard = 0;
    std::uint64_t connection = 0;
  };

  /// Connects nothing yet: the listener starts with the first listening().
  PgWaker(std::string conninfo, std::chrono::milliseconds connect_budget, std::string channel);
  PgWaker(const PgWaker&) = delete;
  PgWaker& operator=(const PgWaker&) = delete;
  ~PgWaker();  // stops the listener and closes its connection

  /// Waits until the listener listens (it starts on the first call), at most until `deadline`;
  /// where it stands then, or nullopt when it did not listen in time.
  std::optional<Mark> listening(Clock::time_point deadline);

  /// Returns once the listener heard `payload` since `mark`, lost the connection `mark` was
  /// taken on (that wake may be lost: the caller looks again), or at `deadline`.
  void wait(const std::string& payload, Mark mark, Clock::time_point deadline);

  /// Where the listener stands if it listens now, else nullopt; starts it on the first call.
  /// Never blocks: the asynchronous waiter's listening().
  std::optional<Mark> listening_now();
  /// Whether a wait for `payload` from `mark` is over, as wait() returns: heard since `mark`,
  /// the connection `mark` was taken on lost, or the listener stopping.
  bool over(const std::string& payload, Mark mark);

  /// Called on the listener's thread with each payload heard, and with nullptr when the listener
  /// starts listening or loses its connection (and on stop()'s caller's thread when it stops). It
  /// must be quick and must not call the waker (it runs under the waker's lock, so that after
  /// unwatch() it is never called again).
  using Watch = std::function<void(const std::string* heard)>;
  std::uint64_t watch(Watch watch);
  void unwatch(std::uint64_t id);

  /// Stops the listener, closes its connection and ends every wait (the destructor's first
  /// step). Later waits end at once.
  void stop();
  /// Whether stop() ran.
  bool stopping();

 private:
  static constexpr std::size_t kKept = 4096;  // recent wakes kept for waiters that look late

  void run();
  // Connects, listens and hands out what it hears until the connection fails or stop.
  void listen_once();
  void heard(std::string payload);
  bool heard_since(const std::string& payload, Mark mark) const;  // under mutex_
  bool over_locked(const std::string& payload, Mark mark) const;  // under mutex_
  void tell_watches(const std::string* heard);                    // under mutex_

  const std::string conninfo_;
  const std::chrono::milliseconds connect_budget_;
  const std::string channel_;
  std::array<int, 2> stop_pipe_{-1, -1};  // written by stop(): the listener's poll returns

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::string> recent_;  // the last kKept payloads heard; the newest is heard_ - 1
  std::uint64_t heard_ = 0;
  std::uint64_t connection_ = 0;  // grows when a connection starts listening
  bool listening_ = false;
  bool stop_ = false;
  std::map<std::uint64_t, Watch> watches_;
  std::uint64_t next_watch_ = 0;
  std::thread thread_;  // started by the first listening() or listening_now()
};

}  // namespace idem::postgres::detail
