#pragma once
// The callers of this process waiting for a hold on one SQLite file to end (SqliteStore's
// await_change): a commit, abort or takeover through any store of the process on that file wakes
// them. Another process's commits do not: its waiters' bound (the Wait policy's pause) applies.

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace idem::sql {

/// Keys are spread over slots, each with a generation that grows whenever a hold of one of its
/// keys ends. A waiter sleeps until its slot's generation passes the one it saw before its claim,
/// so a hold that ends between that claim and the wait is not missed. Two keys of one slot may
/// wake each other's waiters early (they claim again). Thread-safe.
class FileWaiters {
 public:
  using Generation = std::uint64_t;

  /// The generation of `key`'s slot now.
  Generation generation(std::string_view key) const noexcept {
    return slot(key).load(std::memory_order_seq_cst);
  }

  /// A hold of `key` ended in this process: its slot's generation grows, and its waiters wake.
  /// Costs one atomic increment and one load when nobody waits.
  void ended(std::string_view key);

  /// Sleeps until `key`'s slot generation is past `seen`, or until `deadline`.
  void wait(std::string_view key, Generation seen, std::chrono::steady_clock::time_point deadline);

 private:
  static constexpr std::size_t kSlots = 64;
  const std::atomic<Generation>& slot(std::string_view key) const noexcept;
  std::atomic<Generation>& slot(std::string_view key) noexcept;

  std::array<std::atomic<Generation>, kSlots> generations_{};
  std::atomic<int> waiters_{0};
  std::mutex mutex_;  // orders a waiter's last look at its generation before a wake
  std::condition_variable changed_;
};

/// The waiters of the file `path` names, by its canonical path (an in-memory database: its own).
std::shared_ptr<FileWaiters> file_waiters(const std::string& path);

}  // namespace idem::sql
