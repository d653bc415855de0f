#pragma once
// The transactional fences of one SQLite file, kept beside it in "<database>-fences" (8 bytes,
// little-endian) where no rollback undoes a draw. The write lock orders the draws; the clock term
// covers a lost or set-back file (docs/sql.md#fences).

#include <cstdint>
#include <string>

namespace idem::sql {

class FenceFile {
 public:
  /// `database`: the main file's name; empty (in-memory, temporary): a counter of this process.
  explicit FenceFile(std::string database);
  ~FenceFile();
  FenceFile(const FenceFile&) = delete;
  FenceFile& operator=(const FenceFile&) = delete;

  /// max(last + 1, system clock in µs), under the database's write lock; throws
  /// std::runtime_error when the file cannot be read or written.
  std::uint64_t draw();

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace idem::sql
