#pragma once
// SpinMutex: a lock for sections of a few hundred nanoseconds: it spins a bounded while (a sleep
// and wake-up cost ten times the section), then sleeps on the lock word (no CPU while preempted).

#include <atomic>
#include <cstdint>

namespace idem::detail {

/// Meets the Lockable requirements (std::lock_guard, std::unique_lock). Not recursive.
class SpinMutex {
 public:
  SpinMutex() = default;
  SpinMutex(const SpinMutex&) = delete;
  SpinMutex& operator=(const SpinMutex&) = delete;

  void lock() noexcept {
    if (try_lock()) return;
    // Spin while the holder is likely still running: read-only, so the line stays shared.
    for (int i = 0; i < kSpins; ++i) {
      relax();
      if (state_.load(std::memory_order_relaxed) == kFree && try_lock()) return;
    }
    // Sleep. Marking the lock contended makes the holder's unlock wake a sleeper.
    while (state_.exchange(kContended, std::memory_order_acquire) != kFree) {
      state_.wait(kContended, std::memory_order_relaxed);
    }
  }

  bool try_lock() noexcept {
    std::uint32_t expected = kFree;
    return state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }

  void unlock() noexcept {
    if (state_.exchange(kFree, std::memory_order_release) == kContended) state_.notify_one();
  }

 private:
  static constexpr std::uint32_t kFree = 0;
  static constexpr std::uint32_t kLocked = 1;
  static constexpr std::uint32_t kContended = 2;  // locked, and a thread may be asleep on it
  // About a microsecond of spinning: several critical sections of the stores that use it.
  static constexpr int kSpins = 128;

  static void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();  // _mm_pause(), without parsing <immintrin.h> (more than the core)
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  std::atomic<std::uint32_t> state_{kFree};
};

}  // namespace idem::detail
