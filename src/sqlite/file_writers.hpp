#pragma once
// The writers' lock of one SQLite file in this process, taken before SQLite's write lock, so that
// one process's connections queue here instead of polling in SQLite's sleeping busy handler.

#include <memory>
#include <string>

#include "sqlite/writers_lock.hpp"

namespace idem::sql {

/// The lock of the file `path` names, by its canonical path (an in-memory database: its own).
std::shared_ptr<WritersLock> file_writers(const std::string& path);

}  // namespace idem::sql
