// ConnectionPool (src/common/connection_pool.hpp): the bound under real threads, the wait
// deadline, hand-over to waiters in arrival order, the idle probe, LIFO reuse and the counters.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/connection_pool.hpp"

namespace idem::detail {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct FakeConn {
  int id = 0;
  std::atomic<bool> alive{true};
};

using Pool = ConnectionPool<FakeConn>;

// The counters a case names have the values it gives (the others are not checked).
void expect_counters(const PoolCounters& c,
                     std::initializer_list<std::pair<std::string_view, std::uint64_t>> expected) {
  const std::map<std::string_view, std::uint64_t> got{
      {"opened", c.opened}, {"reused", c.reused},     {"discarded", c.discarded},
      {"waits", c.waits},   {"timeouts", c.timeouts}, {"in_use", c.in_use},
      {"idle", c.idle}};
  for (const auto& [name, value] : expected) EXPECT_EQ(got.at(name), value) << name;
}

std::unique_ptr<FakeConn> numbered(int id) {
  auto conn = std::make_unique<FakeConn>();
  conn->id = id;
  return conn;
}

// A factory that numbers its connections 1, 2, 3... and counts its calls.
struct Opener {
  std::atomic<int> calls{0};
  Pool::Factory factory() {
    return [this](Clock::time_point) { return numbered(++calls); };
  }
};

// Waits (bounded) until `done` holds; the pool's queue is only observable through its counters.
template <class F>
bool eventually(F done) {
  const auto until = Clock::now() + 10s;
  while (!done()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

Clock::time_point in(std::chrono::milliseconds d) { return Clock::now() + d; }

TEST(ConnectionPoolTest, ReusesTheMostRecentlyReturnedConnectionFirst) {
  Opener opener;
  Pool pool({.max_open = 3}, opener.factory());
  {
    Pool::Lease a = pool.acquire(in(1s));
    Pool::Lease b = pool.acquire(in(1s));
    Pool::Lease c = pool.acquire(in(1s));
    EXPECT_EQ(a->id, 1);
    EXPECT_EQ(b->id, 2);
    EXPECT_EQ(c->id, 3);
    a.reset();
    c.reset();
    b.reset();  // the stack, top first: 2, 3, 1
  }
  Pool::Lease first = pool.acquire(in(1s));
  Pool::Lease second = pool.acquire(in(1s));
  EXPECT_EQ(first->id, 2);
  EXPECT_EQ(second->id, 3);
  EXPECT_EQ(opener.calls.load(), 3);
  expect_counters(pool.counters(),
                  {{"opened", 3u}, {"reused", 2u}, {"waits", 0u}, {"in_use", 2u}, {"idle", 1u}});
}

// Eight threads share three connections, each acquire holding its connection a little while: never
// more than three are lent at once, no fourth is opened, and every acquire gets one.
void bound_is_honoured(PoolOptions options) {
  Opener opener;
  Pool pool(options, opener.factory());
  std::atomic<int> lent{0};
  std::atomic<int> most{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  threads.reserve(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        try {
          Pool::Lease lease = pool.acquire(in(30s));
          const int now = ++lent;
          int seen = most.load();
          while (now > seen && !most.compare_exchange_weak(seen, now)) {
          }
          std::this_thread::sleep_for(50us);
          --lent;
        } catch (const std::exception&) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LE(most.load(), 3);
  EXPECT_GE(most.load(), 2);  // the threads did share the pool
  EXPECT_EQ(opener.calls.load(), 3);
  const PoolCounters c = pool.counters();
  EXPECT_EQ(c.opened, 3u);
  EXPECT_EQ(c.opened + c.reused, 8u * 200u);
  EXPECT_GT(c.waits, 0u);
  EXPECT_EQ(c.timeouts, 0u);
  EXPECT_EQ(c.in_use, 0u);
  EXPECT_EQ(c.idle, 3u);
}

TEST(ConnectionPoolTest, NeverLendsMoreThanItsBoundUnderRealThreads) {
  bound_is_honoured({.max_open = 3});
}

TEST(ConnectionPoolTest, NeverLendsMoreThanItsBoundWhenCallersMayPassTheOldestWaiter) {
  bound_is_honoured({.max_open = 3, .fair_after = 500us});
}

// Every connection busy: the acquire waits up to its deadline, no longer than a generous bound,
// and fails with PoolExhausted saying how many and for how long.
TEST(ConnectionPoolTest, AnAcquireGivesUpAtItsDeadlineWithPoolExhausted) {
  Opener opener;
  Pool pool({.max_open = 1}, opener.factory());
  Pool::Lease held = pool.acquire(in(1s));
  const auto start = Clock::now();
  try {
    (void)pool.acquire(start + 200ms);
    ADD_FAILURE() << "acquired a second connection from a pool of one";
  } catch (const PoolExhausted& e) {
    const auto waited = Clock::now() - start;
    EXPECT_GE(waited, 200ms);
    EXPECT_LT(waited, 5s);
    EXPECT_EQ(e.busy(), 1u);
    // The deadline less the moment acquire() began: a preempted test thread may begin late.
    EXPECT_GE(e.waited(), 100ms);
    EXPECT_LE(e.waited(), 200ms);
    EXPECT_EQ(std::string(e.what()), "connection pool exhausted: all 1 connections busy for " +
                                         std::to_string(e.waited().count()) + " ms");
  }
  const PoolCounters c = pool.counters();
  EXPECT_EQ(c.waits, 1u);
  EXPECT_EQ(c.timeouts, 1u);
  EXPECT_EQ(c.in_use, 1u);
  // The waiter left the queue: the next acquire after a release gets the connection at once.
  held.reset();
  Pool::Lease again = pool.acquire(Clock::now());
  EXPECT_EQ(again->id, 1);
}

TEST(ConnectionPoolTest, AnAcquirePastItsDeadlineWithAFreeConnectionSucceeds) {
  Opener opener;
  Pool pool({.max_open = 1}, opener.factory());
  Pool::Lease lease = pool.acquire(Clock::now() - 1s);
  EXPECT_EQ(lease->id, 1);
}

// A connection given back goes to the waiter, which wakes long before its deadline.
TEST(ConnectionPoolTest, AReleaseWakesAWaiter) {
  Opener opener;
  Pool pool({.max_open = 1}, opener.factory());
  Pool::Lease held = pool.acquire(in(1s));
  FakeConn* const conn = held.get();
  std::atomic<FakeConn*> got{nullptr};
  Clock::duration waited{};
  std::thread waiter([&] {
    const auto start = Clock::now();
    Pool::Lease lease = pool.acquire(start + 60s);
    waited = Clock::now() - start;
    got = lease.get();
  });
  ASSERT_TRUE(eventually([&] { return pool.counters().waits == 1; }));
  std::this_thread::sleep_for(50ms);
  held.reset();
  waiter.join();
  EXPECT_EQ(got.load(), conn);
  EXPECT_LT(waited, 30s);
  EXPECT_EQ(pool.counters().timeouts, 0u);
  EXPECT_EQ(opener.calls.load(), 1);
}

// A connection given back broken is closed, and its slot goes to the waiter, which opens a new
// one.
TEST(ConnectionPoolTest, ADiscardedConnectionFreesItsSlotForAWaiter) {
  Opener opener;
  Pool pool({.max_open = 1}, opener.factory());
  Pool::Lease held = pool.acquire(in(1s));
  std::atomic<int> got{0};
  std::thread waiter([&] { got = pool.acquire(in(60s))->id; });
  ASSERT_TRUE(eventually([&] { return pool.counters().waits == 1; }));
  held.discard();
  held.reset();
  waiter.join();
  EXPECT_EQ(got.load(), 2);
  expect_counters(pool.counters(),
                  {{"opened", 2u}, {"discarded", 1u}, {"in_use", 0u}, {"idle", 1u}});
}

// Waiters are served in arrival order, however the scheduler wakes them.
TEST(ConnectionPoolTest, WaitersAreServedInArrivalOrder) {
  for (const PoolOptions options :
       {PoolOptions{.max_open = 1}, PoolOptions{.max_open = 1, .fair_after = 500us}}) {
    Opener opener;
    Pool pool(options, opener.factory());
    Pool::Lease held = pool.acquire(in(1s));
    std::mutex order_mutex;
    std::vector<int> order;
    std::vector<std::thread> waiters;
    for (int w = 0; w < 4; ++w) {
      waiters.emplace_back([&, w] {
        Pool::Lease lease = pool.acquire(in(60s));
        std::lock_guard lock(order_mutex);
        order.push_back(w);
      });
      ASSERT_TRUE(
          eventually([&] { return pool.counters().waits == static_cast<unsigned>(w + 1); }));
    }
    held.reset();
    for (std::thread& t : waiters) t.join();
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(opener.calls.load(), 1);
  }
}

// With fair_after, a caller that gives its connection back and asks again at once may keep it,
// but not past a waiter that has waited fair_after: the waiter gets one within its deadline, and
// a caller asking right after a hand-over to such a waiter finds none.
TEST(ConnectionPoolTest, AWaiterIsNotStarvedByACallerThatAsksAgainAtOnce) {
  Opener opener;
  Pool pool({.max_open = 1, .fair_after = 500us}, opener.factory());
  std::atomic<bool> done{false};
  std::atomic<long> turns{0};
  std::thread greedy([&] {
    while (!done.load()) {
      Pool::Lease lease = pool.acquire(in(60s));
      ++turns;
    }
  });
  while (turns.load() < 100) std::this_thread::yield();
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(pool.acquire(in(60s))) << "turn " << i;
  done = true;
  greedy.join();
  EXPECT_EQ(opener.calls.load(), 1);
  EXPECT_EQ(pool.counters().timeouts, 0u);
}

TEST(ConnectionPoolTest, AWaiterThatHasWaitedFairAfterIsHandedTheConnection) {
  Opener opener;
  Pool pool({.max_open = 1, .fair_after = 500us}, opener.factory());
  Pool::Lease held = pool.acquire(in(1s));
  std::promise<void> release;
  std::thread waiter([&] {
    Pool::Lease lease = pool.acquire(in(60s));
    release.get_future().wait();
  });
  ASSERT_TRUE(eventually([&] { return pool.counters().waits == 1u; }));
  std::this_thread::sleep_for(1ms);  // past fair_after, whatever the load
  held.reset();
  EXPECT_THROW((void)pool.acquire(in(0ms)), PoolExhausted);  // handed over, not idle
  release.set_value();
  waiter.join();
  EXPECT_TRUE(pool.acquire(in(60s)));
}

// A connection that died while idle is found by the probe, closed, and a new one opened in its
// slot; the caller never sees the dead one.
TEST(ConnectionPoolTest, TheProbeDiscardsADeadIdleConnectionAndOpensANewOne) {
  Opener opener;
  std::atomic<int> probes{0};
  Pool pool({.max_open = 1}, opener.factory(), [&](FakeConn& c) {
    ++probes;
    return c.alive.load();
  });
  FakeConn* first = nullptr;
  {
    Pool::Lease lease = pool.acquire(in(1s));
    first = lease.get();
  }
  first->alive = false;  // the server closed it meanwhile
  Pool::Lease lease = pool.acquire(in(1s));
  EXPECT_EQ(lease->id, 2);
  EXPECT_TRUE(lease->alive);
  EXPECT_EQ(probes.load(), 1);
  expect_counters(
      pool.counters(),
      {{"opened", 2u}, {"reused", 0u}, {"discarded", 1u}, {"in_use", 1u}, {"idle", 0u}});
}

// With a dead connection on top of the idle stack, the next idle one is lent: no connect.
TEST(ConnectionPoolTest, AfterADeadIdleConnectionTheNextIdleOneIsLent) {
  Opener opener;
  Pool pool({.max_open = 2}, opener.factory(), [](FakeConn& c) { return c.alive.load(); });
  {
    Pool::Lease a = pool.acquire(in(1s));
    Pool::Lease b = pool.acquire(in(1s));
    b->alive = false;
    a.reset();
    b.reset();  // on top
  }
  Pool::Lease lease = pool.acquire(in(1s));
  EXPECT_EQ(lease->id, 1);
  EXPECT_EQ(opener.calls.load(), 2);
  expect_counters(pool.counters(),
                  {{"reused", 1u}, {"discarded", 1u}, {"in_use", 1u}, {"idle", 0u}});
  // The dead one's slot is free again.
  Pool::Lease second = pool.acquire(Clock::now());
  EXPECT_EQ(second->id, 3);
}

// Only a connection idle at least probe_idle_after is probed; one returned moments ago is lent
// as it is.
TEST(ConnectionPoolTest, OnlyConnectionsIdleLongEnoughAreProbed) {
  Opener opener;
  std::atomic<int> probes{0};
  const auto probe = [&](FakeConn&) {
    ++probes;
    return true;
  };
  Pool fresh({.max_open = 1, .probe_idle_after = std::chrono::hours{1}}, opener.factory(), probe);
  (void)fresh.acquire(in(1s));
  (void)fresh.acquire(in(1s));
  EXPECT_EQ(probes.load(), 0);

  Pool stale({.max_open = 1, .probe_idle_after = 20ms}, opener.factory(), probe);
  (void)stale.acquire(in(1s));
  std::this_thread::sleep_for(50ms);
  (void)stale.acquire(in(1s));
  EXPECT_EQ(probes.load(), 1);
}

// A factory that throws frees its slot: the failure reaches the caller, the next call opens.
TEST(ConnectionPoolTest, AFailedOpenFreesItsSlot) {
  std::atomic<int> calls{0};
  Pool pool({.max_open = 1}, [&](Clock::time_point) -> Pool::Handle {
    if (++calls == 1) throw std::runtime_error("refused");
    return numbered(calls.load());
  });
  EXPECT_THROW((void)pool.acquire(in(1s)), std::runtime_error);
  EXPECT_EQ(pool.counters().in_use, 0u);
  Pool::Lease lease = pool.acquire(Clock::now());
  EXPECT_EQ(lease->id, 2);
  EXPECT_EQ(pool.counters().opened, 1u);
}

// A failed open's slot goes to a waiter, which opens in it.
TEST(ConnectionPoolTest, AFailedOpenHandsItsSlotToAWaiter) {
  std::atomic<int> calls{0};
  std::atomic<bool> let_fail{false};
  Pool pool({.max_open = 1}, [&](Clock::time_point) -> Pool::Handle {
    if (++calls == 1) {
      while (!let_fail) std::this_thread::sleep_for(1ms);  // opening, slowly
      throw std::runtime_error("refused");
    }
    return numbered(calls.load());
  });
  std::thread opener([&] { EXPECT_THROW((void)pool.acquire(in(60s)), std::runtime_error); });
  ASSERT_TRUE(eventually([&] { return calls.load() == 1; }));
  std::atomic<int> got{0};
  std::thread waiter([&] { got = pool.acquire(in(60s))->id; });
  ASSERT_TRUE(eventually([&] { return pool.counters().waits == 1; }));
  let_fail = true;
  opener.join();
  waiter.join();
  EXPECT_EQ(got.load(), 2);
  EXPECT_EQ(pool.counters().timeouts, 0u);
}

// The factory is told the deadline the caller gave for opening.
TEST(ConnectionPoolTest, TheFactoryGetsTheOpenDeadline) {
  Clock::time_point seen{};
  Pool pool({.max_open = 1}, [&](Clock::time_point open_by) {
    seen = open_by;
    return std::make_unique<FakeConn>();
  });
  const auto open_by = in(123ms);
  (void)pool.acquire(in(1s), open_by);
  EXPECT_EQ(seen, open_by);
}

// A connection given back is recycled (a rollback, in the SQL stores) before anyone else gets it;
// one the recycle refuses, or throws on, is closed and its slot freed.
TEST(ConnectionPoolTest, AConnectionGivenBackIsRecycledOrClosed) {
  Opener opener;
  std::vector<int> recycled;
  int refuse = 0;  // the id the recycle refuses
  Pool pool({.max_open = 1}, opener.factory(), {}, [&](FakeConn& conn) {
    recycled.push_back(conn.id);
    if (conn.id == refuse) return false;
    if (conn.id < 0) throw std::runtime_error("recycle failed");
    return true;
  });
  {
    Pool::Lease lease = pool.acquire(in(1s));
    EXPECT_EQ(lease->id, 1);
    EXPECT_TRUE(recycled.empty());  // nothing recycled before the lease ends
  }
  EXPECT_EQ(recycled, std::vector<int>{1});
  EXPECT_EQ(pool.counters().idle, 1u);
  refuse = 1;
  { EXPECT_EQ(pool.acquire(in(1s))->id, 1); }
  PoolCounters c = pool.counters();
  EXPECT_EQ(c.idle, 0u);
  EXPECT_EQ(c.in_use, 0u);
  EXPECT_EQ(c.discarded, 1u);
  {
    Pool::Lease lease = pool.acquire(in(1s));
    EXPECT_EQ(lease->id, 2);  // a new one in the freed slot
    lease->id = -2;           // and the recycle throws on it
  }
  c = pool.counters();
  EXPECT_EQ(c.discarded, 2u);
  EXPECT_EQ(c.idle + c.in_use, 0u);
  {
    Pool::Lease lease = pool.acquire(in(1s));
    lease.discard();  // broken: closed without a recycle
  }
  EXPECT_EQ(recycled, (std::vector<int>{1, 1, -2}));
  EXPECT_EQ(pool.counters().discarded, 3u);
}

}  // namespace
}  // namespace idem::detail
