#include "sqlite/file_waiters.hpp"

#include <filesystem>
#include <functional>
#include <system_error>
#include <unordered_map>

namespace idem::sql {

namespace {

// Two spellings of one file (a symlink...) give one entry; weakly_canonical: it may not exist yet.
std::string key_of(const std::string& path) {
  if (path.rfind("file:", 0) == 0) return path;
  std::error_code error;
  std::filesystem::path canonical = std::filesystem::weakly_canonical(path, error);
  if (error) canonical = std::filesystem::absolute(path, error);
  return error ? path : canonical.string();
}

bool private_database(const std::string& path) {
  return path.empty() || path == ":memory:" || path.rfind("file::memory:", 0) == 0;
}

}  // namespace

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
  if (private_database(path)) return std::make_shared<FileWaiters>();
  static std::mutex mutex;
  static std::unordered_map<std::string, std::weak_ptr<FileWaiters>> registry;
  const std::string key = key_of(path);
  std::lock_guard lock(mutex);
  std::erase_if(registry, [](const auto& entry) { return entry.second.expired(); });
  std::weak_ptr<FileWaiters>& entry = registry[key];
  std::shared_ptr<FileWaiters> waiters = entry.lock();
  if (!waiters) {
    waiters = std::make_shared<FileWaiters>();
    entry = waiters;
  }
  return waiters;
}

}  // namespace idem::sql
