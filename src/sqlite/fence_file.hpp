#pragma once
// The transactional fences of one SQLite file. A transactional claim's writes roll back with its
// transaction, so its fence cannot be kept in the database: it is kept beside it, in
// "<database>-fences" (8 bytes, the last fence drawn, little-endian), written outside every
// transaction of the database. No rollback undoes a draw, and a process killed after one leaves
// it written.
//
// Draws are ordered by the database's write lock, which every drawer holds (BEGIN IMMEDIATE, or
// the INSERT that calls idem_next_fence()): across processes and threads, a draw comes after
// every earlier draw on the file, and the key a claim holds was held by every earlier holder
// before that. So the fences of one key grow in the order its claims held it.
//
// A draw is max(last + 1, the system clock in microseconds). The clock term makes a lost or
// set-back file harmless while the clock moves forward: the file deleted or copied without its
// database, or set back by an OS crash or power loss before its page reached the disk (it is not
// synced), still gives fences above every earlier one.

#include <cstdint>
#include <string>

namespace idem::sql {

class FenceFile {
 public:
  /// `database`: the main database's file name (sqlite3_db_filename); empty for an in-memory or
  /// temporary database, which no other process sees: its fences come from a counter of this
  /// process.
  explicit FenceFile(std::string database);
  ~FenceFile();
  FenceFile(const FenceFile&) = delete;
  FenceFile& operator=(const FenceFile&) = delete;

  /// A fence larger than every fence drawn before on this database. The caller holds the
  /// database's write lock. Throws std::runtime_error when the file cannot be read or written.
  std::uint64_t draw();

  /// The file's path ("" without one).
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace idem::sql
