#include "sqlite/file_writers.hpp"

#include <filesystem>
#include <mutex>
#include <unordered_map>

namespace idem::sql {

namespace {

// Every spelling of one file (relative or absolute, "./", a symlinked directory...) gives one
// key, whether the file exists yet or not: absolute first, since weakly_canonical leaves a
// relative path whose first part does not exist relative, then the existing part resolved.
std::string key_of(const std::string& path) {
  if (path.rfind("file:", 0) == 0) return path;
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(path, error);
  if (error) return path;
  std::filesystem::path canonical = std::filesystem::weakly_canonical(absolute, error);
  return error ? absolute.lexically_normal().string() : canonical.string();
}

bool private_database(const std::string& path) {
  return path.empty() || path == ":memory:" || path.rfind("file::memory:", 0) == 0;
}

}  // namespace

std::shared_ptr<WritersLock> file_writers(const std::string& path) {
  if (private_database(path)) return std::make_shared<WritersLock>();
  static std::mutex mutex;
  static std::unordered_map<std::string, std::weak_ptr<WritersLock>> locks;
  const std::string key = key_of(path);
  std::lock_guard lock(mutex);
  std::erase_if(locks, [](const auto& entry) { return entry.second.expired(); });
  std::weak_ptr<WritersLock>& slot = locks[key];
  std::shared_ptr<WritersLock> writers = slot.lock();
  if (!writers) {
    writers = std::make_shared<WritersLock>();
    slot = writers;
  }
  return writers;
}

}  // namespace idem::sql
