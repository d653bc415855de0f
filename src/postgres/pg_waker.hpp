#pragma once
// PgWaker: a PostgresStore's listener for the wakes of held records (LISTEN on the records'
// wake channel), and the callers in await_change that wait for one.
//
// One connection per store, on a thread of its own, hears every wake and hands each to the
// waiters of its record: a connection per waiting caller would hold a server backend per
// duplicate (31 duplicates, 31 backends) and make every NOTIFY deliver to each of them.

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
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

 private:
  static constexpr std::size_t kKept = 4096;  // recent wakes kept for waiters that look late

  void run();
  // Connects, listens and hands out what it hears until the connection fails or stop.
  void listen_once();
  void heard(std::string payload);
  bool heard_since(const std::string& payload, Mark mark) const;  // under mutex_
  bool stopping();

  const std::string conninfo_;
  const std::chrono::milliseconds connect_budget_;
  const std::string channel_;
  std::array<int, 2> stop_pipe_{-1,
                                -1};  // written once by the destructor: the listener's poll returns

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::string> recent_;  // the last kKept payloads heard; the newest is heard_ - 1
  std::uint64_t heard_ = 0;
  std::uint64_t connection_ = 0;  // grows when a connection starts listening
  bool listening_ = false;
  bool stop_ = false;
  std::thread thread_;  // started by the first listening()
};

}  // namespace idem::postgres::detail
