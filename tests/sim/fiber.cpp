#include "sim/fiber.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

// libstdc++'s per-thread exception state; its first two members are what EhGlobals copies.
namespace __cxxabiv1 {
struct __cxa_eh_globals;
extern "C" __cxa_eh_globals* __cxa_get_globals() noexcept;
}  // namespace __cxxabiv1

namespace idem::sim {

namespace {

constexpr std::size_t kStackSize = std::size_t{256} << 10;

std::size_t page_size() {
  static const auto size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

// Stacks are reused: a run makes and ends many fibers, and mmap is not cheap.
std::vector<void*>& free_stacks() {
  thread_local std::vector<void*> stacks;
  return stacks;
}

EhGlobals* eh_globals() { return reinterpret_cast<EhGlobals*>(__cxxabiv1::__cxa_get_globals()); }

}  // namespace

FiberStack::FiberStack() : size_(kStackSize) {
  std::vector<void*>& pool = free_stacks();
  if (!pool.empty()) {
    base_ = pool.back();
    pool.pop_back();
    return;
  }
  const std::size_t guard = page_size();
  void* mapped =
      ::mmap(nullptr, size_ + guard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) throw std::bad_alloc();
  ::mprotect(mapped, guard, PROT_NONE);  // an overflow faults instead of corrupting
  base_ = static_cast<char*>(mapped) + guard;
}

FiberStack::~FiberStack() {
  if (base_ != nullptr) free_stacks().push_back(base_);
}

Fiber::Fiber(std::function<void()> body) : body_(std::move(body)) {}

Fiber::~Fiber() = default;

void Fiber::entry(unsigned int high, unsigned int low) {
  auto* self = reinterpret_cast<Fiber*>((static_cast<std::uintptr_t>(high) << 32) |
                                        static_cast<std::uintptr_t>(low));
  try {
    self->body_();
  } catch (...) {
    self->escaped_ = std::current_exception();
  }
  self->done_ = true;
  self->yield();
}

void Fiber::resume() {
  if (done_) return;
  if (!started_) {
    started_ = true;
    ::getcontext(&context_);
    context_.uc_stack.ss_sp = stack_.base();
    context_.uc_stack.ss_size = stack_.size();
    context_.uc_link = nullptr;
    const auto address = reinterpret_cast<std::uintptr_t>(this);
    ::makecontext(&context_, reinterpret_cast<void (*)()>(&Fiber::entry), 2,
                  static_cast<unsigned int>(address >> 32),
                  static_cast<unsigned int>(address & 0xffffffffu));
  }
  // The thread's exception state is the running context's: the fiber's while it runs.
  EhGlobals* globals = eh_globals();
  const EhGlobals scheduler = *globals;
  *globals = own_;
  ::swapcontext(&scheduler_, &context_);
  own_ = *globals;
  *globals = scheduler;
  if (escaped_) std::rethrow_exception(std::exchange(escaped_, nullptr));
}

void Fiber::yield() { ::swapcontext(&context_, &scheduler_); }

}  // namespace idem::sim
