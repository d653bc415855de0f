#include "sqlite/file_waiters.hpp"

#include <functional>

#include "sqlite/file_writers.hpp"

namespace idem::sql {

const std::atomic<FileWaiters::Generation>& FileWaiters::slot(std::string_view key) const noexcept {
  return generations_[std::hash<std::string_view>{}(key) % kSlots];
}

std::atomic<FileWaiters::Generation>& FileWaiters::slot(std::string_view key) noexcept {
  return generations_[std::hash<std::string_view>{}(key) % kSlots];
}

void FileWaiters::ended(std::string_view key) {
  slot(key).fetch_add(1, std::memory_order_seq_cst);
  // A waiter counts itself before its last look at the generation: if it is not counted yet, that
  // look sees the new generation.
  if (waiters_.load(std::memory_order_seq_cst) == 0) return;
  { std::lock_guard lock(mutex_); }  // a waiter between its look and its sleep is asleep after
  changed_.notify_all();
}

void FileWaiters::wait(std::string_view key, Generation seen,
                       std::chrono::steady_clock::time_point deadline) {
  const std::atomic<Generation>& generation = slot(key);
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  {
    std::unique_lock lock(mutex_);
    (void)changed_.wait_until(lock, deadline,
                              [&] { return generation.load(std::memory_order_seq_cst) != seen; });
  }
  waiters_.fetch_sub(1, std::memory_order_seq_cst);
}

std::shared_ptr<FileWaiters> file_waiters(const std::string& path) {
  return per_file<FileWaiters>(path);
}

}  // namespace idem::sql
