// The writers' lock of a SQLite file within a process (src/sqlite/writers_lock.hpp): arrival order
// among waiters, the bound on how long a waiter may be passed, deadlines, release from another
// thread; and the one lock of a file whatever its spelling (src/sqlite/file_writers.hpp).

#include "sqlite/writers_lock.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sqlite/file_waiters.hpp"
#include "sqlite/file_writers.hpp"

namespace idem::sql {
namespace {

using std::chrono::milliseconds;
using Clock = WritersLock::Clock;

Clock::time_point in(milliseconds d) { return Clock::now() + d; }

// Until `n` callers wait; fails the test after 10 s rather than hang it.
void wait_for_waiters(WritersLock& lock, std::size_t n) {
  const auto give_up = Clock::now() + std::chrono::seconds{10};
  while (lock.waiting() < n && Clock::now() < give_up) std::this_thread::sleep_for(milliseconds{1});
  EXPECT_GE(lock.waiting(), n) << "waiters did not queue within 10 s";
}

TEST(WritersLockTest, WaitersGetTheLockInArrivalOrder) {
  WritersLock lock;
  ASSERT_TRUE(lock.lock_until(in(milliseconds{0})));
  std::mutex mutex;
  std::vector<int> order;
  std::vector<std::thread> waiters;
  for (int i = 0; i < 5; ++i) {
    waiters.emplace_back([&, i] {
      ASSERT_TRUE(lock.lock_until(in(std::chrono::seconds{60})));
      {
        std::lock_guard guard(mutex);
        order.push_back(i);
      }
      lock.unlock();
    });
    wait_for_waiters(lock, static_cast<std::size_t>(i) + 1);  // queued before the next starts
  }
  lock.unlock();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(lock.lock_until(in(milliseconds{0})));  // free again
  lock.unlock();
}

// Once the oldest waiter has waited kFairAfter, the lock is handed to it: a caller that asks as
// soon as it is released (the holder writing again) does not get it.
TEST(WritersLockTest, ACallerCannotPassAWaiterThatHasWaitedItsTurn) {
  WritersLock lock;
  ASSERT_TRUE(lock.lock_until(in(milliseconds{0})));
  std::promise<void> release;
  auto waiter = std::async(std::launch::async, [&] {
    if (!lock.lock_until(in(std::chrono::seconds{60}))) return false;
    release.get_future().wait();  // holds the lock until the test is done asking
    lock.unlock();
    return true;
  });
  wait_for_waiters(lock, 1);
  std::this_thread::sleep_for(WritersLock::kFairAfter * 2);  // past its patience, whatever the load
  lock.unlock();
  EXPECT_FALSE(lock.lock_until(in(milliseconds{0})));  // handed over: not free for this caller
  release.set_value();
  EXPECT_TRUE(waiter.get());
  EXPECT_TRUE(lock.lock_until(in(std::chrono::seconds{60})));
  lock.unlock();
}

// A thread that takes the lock again the moment it releases it, over and over, does not keep a
// waiter out: the waiter gets it within its deadline.
TEST(WritersLockTest, AWaiterIsNotStarvedByAHolderThatTakesItAgainAtOnce) {
  WritersLock lock;
  std::atomic<bool> done{false};
  std::atomic<long> turns{0};
  std::thread greedy([&] {
    while (!done.load()) {
      if (lock.lock_until(in(std::chrono::seconds{60}))) {
        ++turns;
        lock.unlock();
      }
    }
  });
  while (turns.load() < 100) std::this_thread::yield();  // the greedy thread is going
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(lock.lock_until(in(std::chrono::seconds{60}))) << "turn " << i;
    lock.unlock();
  }
  done = true;
  greedy.join();
}

TEST(WritersLockTest, AWaiterPastItsDeadlineLeavesTheQueueAndPassesItsTurnOn) {
  WritersLock lock;
  ASSERT_TRUE(lock.lock_until(in(milliseconds{0})));
  EXPECT_FALSE(lock.lock_until(in(milliseconds{0})));  // held: no wait at all
  auto impatient =
      std::async(std::launch::async, [&] { return lock.lock_until(in(milliseconds{1000})); });
  wait_for_waiters(lock, 1);
  auto patient =
      std::async(std::launch::async, [&] { return lock.lock_until(in(std::chrono::seconds{60})); });
  wait_for_waiters(lock, 2);
  EXPECT_FALSE(impatient.get());  // the oldest gave up
  EXPECT_EQ(lock.waiting(), 1u);
  lock.unlock();
  EXPECT_TRUE(patient.get());  // ... and the next one got the lock
  EXPECT_EQ(lock.waiting(), 0u);
  lock.unlock();
}

TEST(WritersLockTest, AnotherThreadMayReleaseTheLock) {
  WritersLock lock;
  std::thread([&] { ASSERT_TRUE(lock.lock_until(in(milliseconds{0}))); }).join();
  auto waiter =
      std::async(std::launch::async, [&] { return lock.lock_until(in(std::chrono::seconds{60})); });
  wait_for_waiters(lock, 1);
  lock.unlock();  // not the thread that took it
  EXPECT_TRUE(waiter.get());
  lock.unlock();
  EXPECT_TRUE(lock.lock_until(in(milliseconds{0})));
  lock.unlock();
}

// The lock is the file's, whatever the spelling: two locks for one file would let two writers of
// this process meet in SQLite's busy handler. The file does not exist yet when the first store
// opens it.
TEST(FileWritersTest, EverySpellingOfAFileNotYetCreatedGivesItsOneLock) {
  const std::filesystem::path dir = std::filesystem::current_path();
  const std::string name = "idem_file_writers_" + std::to_string(::getpid()) + ".db";
  ASSERT_FALSE(std::filesystem::exists(dir / name));
  const std::shared_ptr<WritersLock> owner = file_writers(name);  // keeps the lock alive
  const WritersLock* lock = owner.get();
  EXPECT_EQ(file_writers("./" + name).get(), lock);
  EXPECT_EQ(file_writers((dir / name).string()).get(), lock);
  EXPECT_EQ(file_writers((dir / "." / name).string()).get(), lock);
  EXPECT_EQ(file_writers(".//" + name).get(), lock);
  EXPECT_NE(file_writers(name + "-other").get(), lock);
  EXPECT_FALSE(std::filesystem::exists(dir / name));  // naming a file does not create it
}

// The waiters of a file's holds are the file's too: a commit through a store that spelled the
// path another way still wakes them.
TEST(FileWritersTest, EverySpellingOfAFileNotYetCreatedGivesItsOneWaitersRoom) {
  const std::filesystem::path dir = std::filesystem::current_path();
  const std::string name = "idem_file_waiters_" + std::to_string(::getpid()) + ".db";
  ASSERT_FALSE(std::filesystem::exists(dir / name));
  const std::shared_ptr<FileWaiters> owner = file_waiters(name);
  EXPECT_EQ(file_waiters("./" + name).get(), owner.get());
  EXPECT_EQ(file_waiters((dir / name).string()).get(), owner.get());
  EXPECT_NE(file_waiters(name + "-other").get(), owner.get());
  EXPECT_NE(file_waiters(":memory:"), file_waiters(":memory:"));
}

TEST(FileWritersTest, InMemoryDatabasesHaveALockEach) {
  EXPECT_NE(file_writers(":memory:"), file_writers(":memory:"));
}

}  // namespace
}  // namespace idem::sql
