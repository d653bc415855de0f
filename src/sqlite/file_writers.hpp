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

/// The T objects per_file hands out, by file and variant: one registry per T.
template <class T>
struct FileRegistry {
  static FileRegistry& of_process() {  // one per T, whichever `make` per_file is given
    static FileRegistry registry;
    return registry;
  }
  std::mutex mutex;
  std::unordered_map<std::string, std::weak_ptr<T>> entries;
};

/// The one T of the file `path` names in this process for `variant` (objects that differ by
/// settings as well as by file), made by `make` on first use and kept while a caller holds it;
/// an in-memory database gets its own.
template <class T, class Make>
std::shared_ptr<T> per_file(const std::string& path, const std::string& variant, Make&& make) {
  if (private_database(path)) return make();
  FileRegistry<T>& registry = FileRegistry<T>::of_process();
  const std::string key = file_identity(path) + '\0' + variant;
  std::lock_guard lock(registry.mutex);
  std::erase_if(registry.entries, [](const auto& entry) { return entry.second.expired(); });
  std::weak_ptr<T>& entry = registry.entries[key];
  std::shared_ptr<T> shared = entry.lock();
  if (!shared) {
    shared = make();
    entry = shared;
  }
  return shared;
}

/// The one T of the file `path` names in this process (above), default-made.
template <class T>
std::shared_ptr<T> per_file(const std::string& path) {
  return per_file<T>(path, std::string(), [] { return std::make_shared<T>(); });
}

/// The writers' lock of the file `path` names.
inline std::shared_ptr<WritersLock> file_writers(const std::string& path) {
  return per_file<WritersLock>(path);
}

}  // namespace idem::sql
