#include "sqlite/fence_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

namespace idem::sql {

namespace {

// Fences are stored as SQL 64-bit integers; a larger value is not one idem wrote.
constexpr std::uint64_t kLimit = std::uint64_t{1} << 62;

std::uint64_t clock_us() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return static_cast<std::uint64_t>(std::max<std::int64_t>(
      0, std::chrono::duration_cast<std::chrono::microseconds>(now).count()));
}

std::runtime_error file_error(const std::string& path, const char* what) {
  return std::runtime_error("idem: fence file " + path + ": " + what + ": " + std::strerror(errno));
}

// In-memory databases (shared-cache ones may have several stores).
std::uint64_t draw_in_process(std::uint64_t floor) {
  static std::atomic<std::uint64_t> last{0};
  std::uint64_t seen = last.load();
  std::uint64_t next = 0;
  do {
    next = std::max(seen + 1, floor);
  } while (!last.compare_exchange_weak(seen, next));
  return next;
}

}  // namespace

FenceFile::FenceFile(std::string database)
    : path_(database.empty() ? std::string() : std::move(database) + "-fences") {}

FenceFile::~FenceFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::uint64_t FenceFile::draw() {
  const std::uint64_t now = clock_us();
  if (path_.empty()) return draw_in_process(now);
  if (fd_ < 0) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw file_error(path_, "cannot open");
  }
  std::array<unsigned char, 8> bytes{};
  const ssize_t n = ::pread(fd_, bytes.data(), bytes.size(), 0);
  if (n < 0) throw file_error(path_, "cannot read");
  std::uint64_t last = 0;
  // Shorter: new (or cut short by a crash), the clock decides.
  if (n == static_cast<ssize_t>(bytes.size())) {
    for (std::size_t i = 0; i < bytes.size(); ++i) last |= std::uint64_t{bytes[i]} << (8 * i);
  }
  if (last >= kLimit) {
    throw std::runtime_error("idem: fence file " + path_ + " holds " + std::to_string(last) +
                             ", not a fence idem wrote (once it is removed, fences continue from "
                             "the clock)");
  }
  const std::uint64_t next = std::max(last + 1, now);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<unsigned char>(next >> (8 * i));
  }
  if (::pwrite(fd_, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
    throw file_error(path_, "cannot write");
  }
  return next;
}

}  // namespace idem::sql
