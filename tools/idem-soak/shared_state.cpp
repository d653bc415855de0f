#include "shared_state.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <stdexcept>

namespace idem::soak {

const char* to_string(Phase p) {
  switch (p) {
    case Phase::idle:
      return "between operations";
    case Phase::claiming:
      return "claiming";
    case Phase::in_handler:
      return "mid-handler";
    case Phase::before_commit:
      return "between handler and commit";
    case Phase::after_call:
      return "after the call";
  }
  return "?";
}

SharedState::SharedState(const std::string& path, bool create) {
  const int fd = ::open(path.c_str(), create ? O_RDWR | O_CREAT | O_TRUNC : O_RDWR, 0600);
  if (fd < 0) throw std::runtime_error("open " + path + ": " + std::strerror(errno));
  if (create && ::ftruncate(fd, sizeof(SharedTable)) != 0) {
    ::close(fd);
    throw std::runtime_error("ftruncate " + path + ": " + std::strerror(errno));
  }
  void* p = ::mmap(nullptr, sizeof(SharedTable), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) throw std::runtime_error("mmap " + path + ": " + std::strerror(errno));
  // A new file is zero-filled, which is the atomics' initial state; construct them once.
  table_ = create ? new (p) SharedTable{} : static_cast<SharedTable*>(p);
}

SharedState::~SharedState() { ::munmap(table_, sizeof(SharedTable)); }

}  // namespace idem::soak
