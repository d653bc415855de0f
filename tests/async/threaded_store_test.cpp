// ThreadedAsyncStore over a blocking store of the test's (a MemoryStore that can hold a claim at
// a gate, or throw): calls run on the adapter's thread and resume on the caller's, the loop goes
// on while a call blocks, a call queued past its timeout never runs, the store's exceptions
// reach the caller as themselves, and destroying the adapter answers every call in flight.

#include "idem/asio/threaded_store.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "async/async_test_support.hpp"
#include "idem/error.hpp"
#include "idem/memory/store.hpp"

namespace idem::testing {

using namespace std::chrono_literals;

// A blocking store over MemoryStore: notes the thread and the number of its claims; a claim
// waits at the gate while it is closed (at most 10 s), and throws `throw_next` once if set.
class GatedStore {
 public:
  Result<Claim> claim(const ClaimRequest& request) {
    std::unique_lock lock(mutex_);
    ++claims_;
    thread_ = std::this_thread::get_id();
    if (throw_next) std::rethrow_exception(std::exchange(throw_next, nullptr));
    at_gate_ = true;
    changed_.notify_all();
    changed_.wait_for(lock, 10s, [&] { return open_; });
    at_gate_ = false;
    lock.unlock();
    return memory_.claim(request);
  }
  Status commit(const Ticket& t, const Completion& c) { return memory_.commit(t, c); }
  Status abort(const Ticket& t) { return memory_.abort(t); }
  Status extend(const Ticket& t, std::chrono::milliseconds lease) {
    return memory_.extend(t, lease);
  }

  void set_gate(bool open) {
    std::lock_guard lock(mutex_);
    open_ = open;
    changed_.notify_all();
  }
  // Waits (at most 10 s) until a claim waits at the closed gate.
  bool wait_for_claim_at_gate() {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, 10s, [&] { return at_gate_; });
  }
  int claims() {
    std::lock_guard lock(mutex_);
    return claims_;
  }
  std::thread::id thread() {
    std::lock_guard lock(mutex_);
    return thread_;
  }

  std::exception_ptr throw_next;  // set before the call that should throw

 private:
  MemoryStore memory_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = true;
  bool at_gate_ = false;
  int claims_ = 0;
  std::thread::id thread_;
};

using ThreadedGated = ThreadedAsyncStore<GatedStore>;
static_assert(AsyncStore<ThreadedGated>);

ClaimRequest claim_of(std::string_view key) {
  return ClaimRequest{.key = key, .lease = 10s, .retention = 1h};
}

TEST(ThreadedAsyncStore, CallsRunOnItsThreadAndResumeOnTheCallersWithoutBlockingIt) {
  ThreadedGated store{ThreadedStoreOptions{}};
  IoRunner runner;
  store.store().set_gate(false);
  std::optional<Result<Claim>> claimed;
  std::thread::id resumed_on;
  net::co_spawn(
      runner.io(),
      [&]() -> net::awaitable<void> {
        claimed.emplace(co_await store.async_claim(claim_of("k")));
        resumed_on = std::this_thread::get_id();
      },
      net::detached);
  // While the claim waits at the gate, the loop's thread (this one) goes on: a timer fires.
  int ticks = 0;
  net::steady_timer tick(runner.io());
  std::function<void(boost::system::error_code)> again = [&](boost::system::error_code) {
    if (++ticks == 5) {
      store.store().set_gate(true);
      return;
    }
    tick.expires_after(2ms);
    tick.async_wait(again);
  };
  runner.io().poll();  // the call is queued
  ASSERT_TRUE(store.store().wait_for_claim_at_gate());
  again({});
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  runner.run_until(
      [&] { return claimed.has_value() || std::chrono::steady_clock::now() > give_up; });
  ASSERT_TRUE(claimed.has_value());
  ASSERT_TRUE(*claimed) << claimed->failure().describe();
  EXPECT_EQ((*claimed)->status, ClaimStatus::acquired);
  EXPECT_EQ(ticks, 5) << "the loop ran while the store's call blocked";
  EXPECT_NE(store.store().thread(), std::this_thread::get_id());
  EXPECT_EQ(resumed_on, std::this_thread::get_id());
}

TEST(ThreadedAsyncStore, AStoresExceptionReachesTheCallerAsItself) {
  ThreadedGated store{ThreadedStoreOptions{}};
  IoRunner runner;
  store.store().throw_next = std::make_exception_ptr(
      Error(make_error_code(errc::record_corrupt), "the row is not a record"));
  try {
    (void)runner.run(store.async_claim(claim_of("k")));
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::record_corrupt));
    EXPECT_NE(std::string(e.what()).find("the row is not a record"), std::string::npos);
  }
  store.store().throw_next = std::make_exception_ptr(std::runtime_error("driver"));
  EXPECT_THROW((void)runner.run(store.async_claim(claim_of("k"))), std::runtime_error);
  Result<Claim> after = runner.run(store.async_claim(claim_of("k")));
  ASSERT_TRUE(after) << "the thread goes on after a call threw";
  EXPECT_EQ(after->status, ClaimStatus::acquired);
}

// The first claim holds the thread at the gate for longer than the second may wait: the second
// is answered store_unavailable and never reaches the store; the thread serves the next call.
TEST(ThreadedAsyncStore, ACallQueuedPastItsTimeoutIsRefusedWithoutRunning) {
  ThreadedGated store{ThreadedStoreOptions{.queue_timeout = 50ms}};
  IoRunner runner;
  store.store().set_gate(false);
  std::optional<Result<Claim>> first;
  std::optional<Result<Claim>> second;
  net::co_spawn(
      runner.io(),
      [&]() -> net::awaitable<void> { first.emplace(co_await store.async_claim(claim_of("a"))); },
      net::detached);
  net::co_spawn(
      runner.io(),
      [&]() -> net::awaitable<void> { second.emplace(co_await store.async_claim(claim_of("b"))); },
      net::detached);
  runner.io().poll();  // both calls queued
  ASSERT_TRUE(store.store().wait_for_claim_at_gate());
  std::this_thread::sleep_for(150ms);  // three times the second's queue_timeout
  store.store().set_gate(true);
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  runner.run_until([&] { return (first && second) || std::chrono::steady_clock::now() > give_up; });
  ASSERT_TRUE(first && second);
  EXPECT_TRUE(*first);
  ASSERT_FALSE(*second);
  EXPECT_EQ(second->error(), errc::store_unavailable);
  EXPECT_NE(second->failure().message.find("waited more than 50 ms"), std::string::npos)
      << second->failure().message;
  EXPECT_EQ(store.store().claims(), 1) << "the refused call reached the store";
  Result<Claim> next = runner.run(store.async_claim(claim_of("b")));
  ASSERT_TRUE(next) << next.failure().describe();
  EXPECT_EQ(next->status, ClaimStatus::acquired);
}

// Destroyed while one call runs and two wait: the running one finishes with its answer, the
// waiting ones are answered store_unavailable without running, and the destructor returns.
TEST(ThreadedAsyncStore, DestroyedWithCallsInFlightAnswersEveryOne) {
  auto store = std::make_unique<ThreadedGated>(ThreadedStoreOptions{});
  GatedStore* inner = &store->store();
  IoRunner runner;
  inner->set_gate(false);
  std::vector<std::optional<Result<Claim>>> answers(3);
  for (int i = 0; i < 3; ++i) {
    net::co_spawn(
        runner.io(),
        [&, i]() -> net::awaitable<void> {
          answers[i].emplace(co_await store->async_claim(claim_of(i == 0 ? "a" : "b")));
        },
        net::detached);
  }
  runner.io().poll();  // all three queued
  ASSERT_TRUE(inner->wait_for_claim_at_gate());
  std::thread destroy([&] { store.reset(); });
  // The destructor marks the store closing, then waits for the call at the gate; the gate opens
  // well after that mark.
  std::this_thread::sleep_for(300ms);
  inner->set_gate(true);
  destroy.join();
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  runner.run_until([&] {
    return (answers[0] && answers[1] && answers[2]) || std::chrono::steady_clock::now() > give_up;
  });
  ASSERT_TRUE(answers[0] && answers[1] && answers[2]) << "a call was left unanswered";
  ASSERT_TRUE(*answers[0]);
  EXPECT_EQ((*answers[0])->status, ClaimStatus::acquired);
  for (int i = 1; i < 3; ++i) {
    ASSERT_FALSE(*answers[i]);
    EXPECT_EQ(answers[i]->error(), errc::store_unavailable);
    EXPECT_NE(answers[i]->failure().message.find("closed"), std::string::npos)
        << answers[i]->failure().message;
  }
}

TEST(ThreadedAsyncStore, AQueueTimeoutThatIsNotPositiveIsRefused) {
  EXPECT_THROW(ThreadedGated(ThreadedStoreOptions{.queue_timeout = 0ms}), std::invalid_argument);
}

}  // namespace idem::testing
