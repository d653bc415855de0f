#pragma once
// Fibers for the simulator: each simulated caller runs on a stack of its own and is switched to
// and from the scheduler with swapcontext, all on one thread. Only the scheduler decides which
// fiber runs next, so a run is a function of its seed, whatever the operating system does.

#include <ucontext.h>

#include <cstddef>
#include <exception>
#include <functional>

namespace idem::sim {

/// A stack from a per-thread pool (mmap'd, with a guard page below it).
class FiberStack {
 public:
  FiberStack();
  ~FiberStack();
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;
  void* base() const noexcept { return base_; }
  std::size_t size() const noexcept { return size_; }

 private:
  void* base_ = nullptr;
  std::size_t size_ = 0;
};

/// What libstdc++ keeps per thread about exceptions being handled (__cxa_eh_globals). A fiber
/// switched out inside a catch block must take its own with it, or another fiber's catch block
/// would end the wrong exception.
struct EhGlobals {
  void* caught = nullptr;
  unsigned int uncaught = 0;
};

class Fiber {
 public:
  /// A fiber that runs `body` at its first resume().
  explicit Fiber(std::function<void()> body);
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  /// From the scheduler: runs the fiber until it yields or ends. An exception that escapes the
  /// body is rethrown here.
  void resume();
  /// From inside the fiber: back to the scheduler.
  void yield();
  bool started() const noexcept { return started_; }
  bool done() const noexcept { return done_; }

 private:
  static void entry(unsigned int high, unsigned int low);

  std::function<void()> body_;
  FiberStack stack_;
  ucontext_t context_{};
  ucontext_t scheduler_{};
  EhGlobals own_{};  // the fiber's exception state, while it is switched out
  bool started_ = false;
  bool done_ = false;
  std::exception_ptr escaped_;
};

}  // namespace idem::sim
