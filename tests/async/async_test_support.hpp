#pragma once
// What the async tests share: running a coroutine to its end on an io_context, cancelling one
// from outside, and a store wrapper whose calls suspend on a timer before they run (so that a
// test can cancel a coroutine while a store call is in flight).

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/system/system_error.hpp>
#include <chrono>
#include <exception>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "idem/asio/async_guard.hpp"
#include "idem/asio/async_store.hpp"
#include "idem/guard.hpp"
#include "idem/testing/async_store_conformance.hpp"

namespace idem::testing {

namespace net = boost::asio;

/// Runs `task` on a fresh io_context (one thread, this one) and returns its value.
template <class T>
T run_one(net::awaitable<T> task) {
  net::io_context io;
  std::future<T> done = net::co_spawn(io, std::move(task), net::use_future);
  io.run();
  return done.get();
}

/// An io_context that never runs out of work, and ways to run it: run(task) to the task's end,
/// run_until(done) from any number of threads at once.
class IoRunner {
 public:
  net::io_context& io() { return io_; }

  template <class T>
  T run(net::awaitable<T> task) {
    // co_spawn needs a default-constructible result; an Outcome is not one.
    auto wrapped = [](net::awaitable<T> t) -> net::awaitable<std::optional<T>> {
      co_return co_await std::move(t);
    };
    std::future<std::optional<T>> result =
        net::co_spawn(io_, wrapped(std::move(task)), net::use_future);
    run_until(
        [&] { return result.wait_for(std::chrono::seconds{0}) == std::future_status::ready; });
    return *result.get();
  }
  void run(net::awaitable<void> task) {
    auto wrapped = [](net::awaitable<void> t) -> net::awaitable<bool> {
      co_await std::move(t);
      co_return true;
    };
    (void)run(wrapped(std::move(task)));
  }
  template <class Done>
  void run_until(Done done) {
    while (!done()) io_.run_one_for(std::chrono::milliseconds{5});
  }

 private:
  net::io_context io_;
  net::executor_work_guard<net::io_context::executor_type> work_{io_.get_executor()};
};

/// Waits `d` on a timer of the current coroutine's executor.
inline net::awaitable<void> pause(std::chrono::milliseconds d) {
  net::steady_timer timer(co_await net::this_coro::executor, d);
  co_await timer.async_wait(net::use_awaitable);
}

/// Waits `d`, whatever cancellation says: a store call in flight is never cut short.
inline net::awaitable<void> uncancellable_pause(std::chrono::milliseconds d) {
  net::steady_timer timer(co_await net::this_coro::executor, d);
  (void)co_await timer.async_wait(
      net::bind_cancellation_slot(net::cancellation_slot(), net::as_tuple(net::use_awaitable)));
}

/// The result of a coroutine started with spawn_cancellable: its value or its exception.
template <class T>
struct Spawned {
  std::optional<T> value;
  std::exception_ptr error;
  bool done = false;

  /// True when it ended with operation_aborted.
  bool aborted() const {
    if (!error) return false;
    try {
      std::rethrow_exception(error);
    } catch (const boost::system::system_error& e) {
      return e.code() == net::error::operation_aborted;
    } catch (...) {
      return false;
    }
  }
};

/// Starts `task` on `io` with `signal`'s slot bound, so that signal.emit() cancels it.
template <class T>
void spawn_cancellable(net::io_context& io, net::awaitable<T> task,
                       net::cancellation_signal& signal, Spawned<T>& out) {
  auto wrapped = [](net::awaitable<T> t) -> net::awaitable<std::optional<T>> {
    co_return co_await std::move(t);
  };
  net::co_spawn(
      io, wrapped(std::move(task)),
      net::bind_cancellation_slot(signal.slot(), [&out](std::exception_ptr e, std::optional<T> v) {
        out.done = true;
        out.error = e;
        if (v) out.value.emplace(std::move(*v));  // emplace: T need not be assignable
      }));
}

/// Emits a terminal cancellation on `signal` `delay` from now, through `timer` (which must outlive
/// the wait). Tests call it from a handler, so the cancel is timed from where the call really is.
inline void cancel_after(net::steady_timer& timer, net::cancellation_signal& signal,
                         std::chrono::milliseconds delay) {
  timer.expires_after(delay);
  timer.async_wait([&signal](auto) { signal.emit(net::cancellation_type::terminal); });
}

/// An AsyncStore over another whose chosen calls first suspend on a timer, and which counts
/// its calls; `fail_commits` commits answer store_unavailable before reaching the store.
template <class Inner>
class SlowStore {
 public:
  explicit SlowStore(Inner& inner) : inner_(inner) {}

  std::chrono::milliseconds claim_delay{0};
  std::chrono::milliseconds commit_delay{0};
  std::atomic<int> fail_commits{0};
  std::atomic<int> claims{0};
  std::atomic<int> commits{0};
  std::atomic<int> aborts{0};

  net::awaitable<Result<Claim>> async_claim(const ClaimRequest& request) {
    ++claims;
    if (claim_delay.count() > 0) co_await uncancellable_pause(claim_delay);
    co_return co_await inner_.async_claim(request);
  }
  net::awaitable<Status> async_commit(const Ticket& ticket, const Completion& completion) {
    ++commits;
    if (commit_delay.count() > 0) co_await uncancellable_pause(commit_delay);
    if (fail_commits.load() > 0) {
      --fail_commits;
      co_return Status(errc::store_unavailable, "injected commit failure");
    }
    co_return co_await inner_.async_commit(ticket, completion);
  }
  net::awaitable<Status> async_abort(const Ticket& ticket) {
    ++aborts;
    co_return co_await inner_.async_abort(ticket);
  }
  net::awaitable<Status> async_extend(const Ticket& ticket, std::chrono::milliseconds lease) {
    co_return co_await inner_.async_extend(ticket, lease);
  }

 private:
  Inner& inner_;
};

/// A blocking store and an asynchronous one that share their records (the same server and key
/// layout, or the same file): each guard replays what the other recorded, with the value the
/// other's handler returned, and another payload is a mismatch for both. Returns how many times
/// the handlers ran (2 when all is well).
template <class Blocking, class Async>
int runs_over_shared_records(Blocking& blocking, Async& async, IoRunner& runner) {
  IdempotencyGuard sync_guard{blocking, Options{.scope = "shared"}};
  AsyncGuard async_guard{async, Options{.scope = "shared"}};
  int runs = 0;
  EXPECT_TRUE(sync_guard.execute("a", "p", [&] { return ++runs; }).recorded());
  auto replay = runner.run(async_guard.async_execute("a", "p", [&] { return ++runs; }));
  EXPECT_TRUE(replay.replayed()) << replay.message();
  EXPECT_EQ(replay.has_value() ? replay.value() : 0, 1);
  EXPECT_TRUE(runner.run(async_guard.async_execute("b", "p", [&] { return ++runs; })).recorded());
  auto back = sync_guard.execute("b", "p", [&] { return ++runs; });
  EXPECT_TRUE(back.replayed()) << back.message();
  EXPECT_EQ(back.has_value() ? back.value() : 0, 2);
  EXPECT_EQ(runner.run(async_guard.async_execute("b", "other", [&] { return ++runs; })).error(),
            errc::payload_mismatch);
  EXPECT_EQ(sync_guard.execute("b", "other", [&] { return ++runs; }).error(),
            errc::payload_mismatch);
  return runs;
}

/// The guard cases' backend (async_guard_cases.hpp) for a cell of the asynchronous kit
/// (idem/testing/async_store_conformance.hpp): the cell's store on this runner's io_context.
/// A cell with `one_thread` keeps its callers on one thread; one with `warm_up` is connected
/// (its first claim answered) before a case starts, so that the cases which cancel a call a few
/// milliseconds in do not meet a slow first connect instead.
template <AsyncCell Cell>
struct CellBackend : IoRunner {
  using Store = typename Cell::Store;
  static constexpr bool kOneThread = requires { requires Cell::one_thread; };

  void set_up() {
    std::optional<CellOptions<Cell>> options = Cell::options();
    if (!options) return;  // skipped or failed by the cell
    store_ = std::make_unique<Store>(io().get_executor(), std::move(*options));
    if constexpr (requires { requires Cell::warm_up; }) {
      Result<Claim> warm = run(
          store_->async_claim(ClaimRequest{.key = "warm-up", .lease = std::chrono::seconds{1}}));
      ASSERT_TRUE(warm) << warm.failure().describe();
    }
  }
  bool ready() const { return store_ != nullptr; }
  Store& store() { return *store_; }

  std::unique_ptr<Store> store_;
};

/// Runs `coroutines` coroutines on `runner`, coroutine c calling every one of `keys` keys once
/// (from key offset + c on) through `guard` with the handler `handler(key, c)` (an
/// awaitable<std::string>), then `seen(key, outcome)`; returns once all of them are done.
template <class Guard, class Handler, class Seen>
void call_every_key(IoRunner& runner, Guard& guard, int coroutines, int keys, int offset,
                    Handler handler, Seen seen) {
  int finished = 0;
  for (int c = 0; c < coroutines; ++c) {
    net::co_spawn(
        runner.io(),
        [&, c]() -> net::awaitable<void> {
          for (int i = 0; i < keys; ++i) {
            const std::string k = std::to_string((i + offset + c) % keys);
            auto out = co_await guard.async_execute(k, [&handler, &k, c] { return handler(k, c); });
            seen(k, out);
          }
          ++finished;
        },
        net::detached);
  }
  runner.run_until([&] { return finished == coroutines; });
}

/// Coroutines calling keys without pause while the server goes down and comes back: each
/// retries a store_unavailable refusal until its call succeeds; what they met is counted here.
struct OutageRun {
  static constexpr int kCoroutines = 16;
  static constexpr int kKeys = 40;

  std::map<int, int> runs;               // handler runs per key
  std::map<int, std::set<int>> answers;  // values callers got per key
  int unavailable = 0;                   // refusals met
  int finished = 0;                      // coroutines done
  bool down = false;                     // set by the test while the server is down
  std::chrono::steady_clock::duration slowest_refusal{};  // of calls started while down

  /// Starts the callers on `runner`, through a guard over `store` whose lease outlasts the outage
  /// and the restart with room to spare (a holder whose commit lands after its lease could be
  /// taken over, and its key would run twice for a reason other than the outage), and whose
  /// commits are retried `commit_attempts` times, past the outage.
  template <class Store>
  void start(IoRunner& runner, Store& store, std::chrono::seconds lease, int commit_attempts) {
    using namespace std::chrono_literals;
    auto guard = std::make_shared<AsyncGuard<Store>>(
        store, Options{.scope = "outage",
                       .lease = lease,
                       .in_progress = Wait{.timeout = 4 * lease},
                       .commit_retry = {
                           .attempts = commit_attempts, .backoff = 50ms, .max_backoff = 100ms}});
    for (int c = 0; c < kCoroutines; ++c) {
      net::co_spawn(runner.io(), caller(guard, c), net::detached);
    }
  }
  template <class Guard>
  net::awaitable<void> caller(std::shared_ptr<Guard> guard, int c) {
    for (int k = 0; k < kKeys; ++k) {
      for (;;) {
        const auto start = std::chrono::steady_clock::now();
        const bool was_down = down;
        auto out = co_await guard->async_execute(std::to_string(k), [this, k, c] {
          ++runs[k];
          return c;
        });
        if (out.has_value()) {
          answers[k].insert(out.value());
          break;
        }
        if (out.error() != errc::store_unavailable) {
          ADD_FAILURE() << "key " << k << ": " << out.message();
          break;
        }
        ++unavailable;
        if (was_down) {
          slowest_refusal = std::max(slowest_refusal, std::chrono::steady_clock::now() - start);
        }
        co_await pause(std::chrono::milliseconds{5});
      }
      co_await pause(std::chrono::milliseconds{3});
    }
    ++finished;
  }
  /// Some calls met the outage and were refused within `bound`; no key's handler ran twice, and
  /// its callers all got one value.
  void expect_refused_promptly_and_nothing_ran_twice(std::chrono::milliseconds bound) {
    EXPECT_GT(unavailable, 0) << "no call met the outage";
    EXPECT_LT(slowest_refusal, bound) << "calls while the server was down did not fail promptly";
    for (int k = 0; k < kKeys; ++k) {
      EXPECT_EQ(runs[k], 1) << "key " << k;
      EXPECT_EQ(answers[k].size(), 1u) << "key " << k << ": callers got different values";
    }
  }
};

}  // namespace idem::testing
