// detail::SpinMutex, the shard lock of MemoryStore: mutual exclusion with more threads than
// cores (so holders are preempted and waiters go to sleep), and a sleeping waiter is woken.

#include "idem/memory/detail/spin_mutex.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace idem::detail {
namespace {

TEST(SpinMutexTest, OneHolderAtATimeWithMoreThreadsThanCores) {
  SpinMutex mutex;
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::uint64_t counter = 0;  // plain: only the lock orders the increments
  const int threads_n = static_cast<int>(std::max(4u, 2 * std::thread::hardware_concurrency()));
  constexpr int kRounds = 50'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < threads_n; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        std::lock_guard lock(mutex);
        if (inside.fetch_add(1, std::memory_order_relaxed) != 0) overlaps.fetch_add(1);
        ++counter;
        if (i % 1000 == 0) std::this_thread::yield();  // a holder off the CPU: waiters sleep
        inside.fetch_sub(1, std::memory_order_relaxed);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(counter, static_cast<std::uint64_t>(threads_n) * kRounds);
}

TEST(SpinMutexTest, AWaiterThatWentToSleepIsWokenByTheUnlock) {
  SpinMutex mutex;
  mutex.lock();
  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    std::lock_guard lock(mutex);
    acquired.store(true);
  });
  // Far longer than the spin phase: the waiter is asleep on the lock word by now.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(acquired.load());
  EXPECT_FALSE(mutex.try_lock());
  mutex.unlock();
  waiter.join();
  EXPECT_TRUE(acquired.load());
  EXPECT_TRUE(mutex.try_lock());
  mutex.unlock();
}

}  // namespace
}  // namespace idem::detail
