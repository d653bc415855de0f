#pragma once
// What the stores of this process share per SQLite file: the writers' lock, taken before SQLite's
// write lock so that one process's connections queue here instead of polling in SQLite's sleeping
// busy handler, and the waiters of its holds (file_waiters.hpp). One object per file whatever the
// spelling of its path.

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "sqlite/writers_lock.hpp"

namespace idem::sql {

/// The name of the file `path` names, the same for every spelling of it (relative or absolute,
/// "./", a symlinked directory...) whether the file exists yet or not; a URI as it is.
std::string file_identity(const std::string& path);

/// True for a database no other connection can open (in memory, or a temporary file).
bool private_database(const std::string& path);

/// The one T of the file `path` names in this process, made on first use and kept while a
/// caller holds it; an in-memory database gets its own.
template <class T>
std::shared_ptr<T> per_file(const std::string& path) {
  if (private_database(path)) return std::make_shared<T>();
  static std::mutex mutex;
  static std::unordered_map<std::string, std::weak_ptr<T>> registry;
  const std::string key = file_identity(path);
  std::lock_guard lock(mutex);
  std::erase_if(registry, [](const auto& entry) { return entry.second.expired(); });
  std::weak_ptr<T>& entry = registry[key];
  std::shared_ptr<T> shared = entry.lock();
  if (!shared) {
    shared = std::make_shared<T>();
    entry = shared;
  }
  return shared;
}

/// The writers' lock of the file `path` names.
inline std::shared_ptr<WritersLock> file_writers(const std::string& path) {
  return per_file<WritersLock>(path);
}

}  // namespace idem::sql
