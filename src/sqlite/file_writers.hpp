#pragma once
// The writers' lock of one SQLite file in this process. Every SqliteStore and entity store of the
// process that opens the file shares it: their write transactions take it first, in arrival
// order, and only then SQLite's write lock, so the connections of one process wait for each other
// here instead of polling in SQLite's sleeping busy handler, which is left to other processes.

#include <memory>
#include <string>

#include "sqlite/fifo_lock.hpp"

namespace idem::sql {

/// The lock of the file `path` names, keyed by its canonical path (a `file:` URI by its text; an
/// in-memory database, which no other connection sees, gets a lock of its own). It lives while
/// some store holds it.
std::shared_ptr<FifoLock> file_writers(const std::string& path);

}  // namespace idem::sql
