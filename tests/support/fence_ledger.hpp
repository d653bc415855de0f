#pragma once
// A downstream system beside the store, for fence tests: a file that handlers of several
// processes append the fence they hold to, outside any transaction of the store, so that a
// rolled-back or killed holder's entry stays. Entries land in the order the handlers ran; a
// ledger that keeps the highest fence accepts an entry only when it is larger than every earlier
// one.

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace idem::testing {

/// Appends `fence` as one line (one write of an O_APPEND file: whole, never interleaved).
inline void ledger_append(const std::string& path, std::uint64_t fence) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot open ledger " + path);
  const std::string line = std::to_string(fence) + "\n";
  const ssize_t n = ::write(fd, line.data(), line.size());
  ::close(fd);
  if (n != static_cast<ssize_t>(line.size())) throw std::runtime_error("short ledger write");
}

/// Every fence appended so far, in order.
inline std::vector<std::uint64_t> ledger_entries(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::uint64_t> out;
  for (std::uint64_t fence = 0; in >> fence;) out.push_back(fence);
  return out;
}

/// Whether every entry is larger than the one before: no two holders shared a fence, and a
/// ledger keeping the highest fence rejected no later holder.
inline bool strictly_growing(const std::vector<std::uint64_t>& fences) {
  for (std::size_t i = 1; i < fences.size(); ++i) {
    if (fences[i] <= fences[i - 1]) return false;
  }
  return true;
}

}  // namespace idem::testing
