#pragma once
// The duplicate storm (duplicate_storm.hpp) for AsyncGuard: one holder and 31 duplicates of one
// key as coroutines on one io_context, the holder's handler a timer of the benchmark's argument
// (ms). Timed (manual) from the holder's handler's return to the last duplicate's answer; the
// counters are the storm's (report_storm). A store runs twice: as it is (an AsyncWakingStore wakes
// the duplicates) and behind a wrapper that hides async_await_change (the guard polls). The bare
// floor is duplicate_storm.hpp's: threads woken by one condition variable.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "duplicate_storm.hpp"
#include "idem/asio/async_guard.hpp"
#include "idem/asio/async_store.hpp"

namespace idem::bench {

/// Counts the calls an asynchronous store gets; Wakes = false hides async_await_change.
template <class S, bool Wakes>
class CountedAsyncStore {
 public:
  static constexpr std::string_view kStoreName = S::kStoreName;
  explicit CountedAsyncStore(S& store) noexcept : store_(&store) {}
  std::atomic<long> calls{0};

  boost::asio::awaitable<Result<Claim>> async_claim(const ClaimRequest& request) {
    calls.fetch_add(1, std::memory_order_relaxed);
    return store_->async_claim(request);
  }
  boost::asio::awaitable<Status> async_commit(const Ticket& ticket, const Completion& completion) {
    calls.fetch_add(1, std::memory_order_relaxed);
    return store_->async_commit(ticket, completion);
  }
  boost::asio::awaitable<Status> async_abort(const Ticket& ticket) {
    calls.fetch_add(1, std::memory_order_relaxed);
    return store_->async_abort(ticket);
  }
  boost::asio::awaitable<Status> async_extend(const Ticket& ticket,
                                              std::chrono::milliseconds lease) {
    calls.fetch_add(1, std::memory_order_relaxed);
    return store_->async_extend(ticket, lease);
  }
  bool wakes() const noexcept requires Wakes { return store_->wakes(); }
  boost::asio::awaitable<bool> async_await_change(const Ticket& held,
                                                  std::chrono::milliseconds bound) requires Wakes {
    calls.fetch_add(1, std::memory_order_relaxed);
    return store_->async_await_change(held, bound);
  }

 private:
  S* store_;
};

/// One storm per iteration over `store` (whose calls complete on `io`), through a
/// CountedAsyncStore<S, Wakes>.
template <bool Wakes, class S>
void run_async_storm(benchmark::State& state, boost::asio::io_context& io, S& store,
                     const std::string& prefix) {
  namespace net = boost::asio;
  const std::chrono::milliseconds handler{state.range(0)};
  CountedAsyncStore<S, Wakes> counted(store);
  AsyncGuard guard{
      counted, Options{.scope = "storm", .in_progress = Wait{.timeout = std::chrono::seconds{10}}}};
  std::vector<double> times_us;
  std::vector<double> calls_per_duplicate;
  // Keys unique in the process: a store whose records outlive one benchmark (a server) must not
  // find the last one's replays.
  static std::atomic<long> next_key{0};
  // While every coroutine waits on another thread, the loop has no work of its own: without the
  // guard, run_one() would then stop it for good.
  auto work = net::make_work_guard(io);
  for (auto _ : state) {
    const std::string key = prefix + std::to_string(next_key.fetch_add(1));
    bool running = false;
    int answered = 0;
    int wrong = 0;
    StormClock::time_point handler_end{};
    StormClock::time_point last_answer{};
    const long calls_before = counted.calls.load();
    net::co_spawn(
        io,
        [&]() -> net::awaitable<void> {
          Outcome<int> out = co_await guard.async_execute(key, [&]() -> net::awaitable<int> {
            running = true;
            net::steady_timer timer(co_await net::this_coro::executor, handler);
            co_await timer.async_wait(net::use_awaitable);
            handler_end = StormClock::now();
            co_return 1;
          });
          if (!out.executed()) ++wrong;
          ++answered;
        },
        net::detached);
    while (!running) io.run_one();
    for (int i = 0; i < kDuplicates; ++i) {
      net::co_spawn(
          io,
          [&]() -> net::awaitable<void> {
            Outcome<int> out = co_await guard.async_execute(key, [] { return 2; });
            last_answer = std::max(last_answer, StormClock::now());
            if (!out || !out.replayed() || out.value() != 1) ++wrong;
            ++answered;
          },
          net::detached);
    }
    while (answered < kDuplicates + 1) io.run_one();
    const double us = std::chrono::duration<double, std::micro>(
                          std::max(last_answer - handler_end, StormClock::duration::zero()))
                          .count();
    state.SetIterationTime(us / 1e6);
    times_us.push_back(us);
    calls_per_duplicate.push_back(static_cast<double>(counted.calls.load() - calls_before - 2) /
                                  kDuplicates);  // the holder's claim and commit aside
    if (wrong != 0) {
      state.SkipWithError("a duplicate was not answered with the holder's replay");
      break;
    }
  }
  report_storm(state, times_us, calls_per_duplicate);
}

}  // namespace idem::bench
