#pragma once
// What the benchmarks of bench/async share: the payload, the handler, the key ids, the batch
// runner that keeps N coroutines in flight on one io_context, and each store's registration
// (async_main.cpp registers those whose server is named in the environment).

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace idem_bench_async {

namespace net = boost::asio;

inline constexpr std::string_view kPayload =
    R"({"amount":1250,"currency":"EUR","card":"tok_4242"})";
inline constexpr std::chrono::milliseconds kLease{30'000};
inline constexpr std::chrono::milliseconds kTtl{600'000};
inline constexpr int kReplayKeys = 1000;
inline constexpr int kPerCaller = 16;  // calls per caller in flight, per batch

inline std::string handler() { return R"({"receipt":"r-000042","status":"captured"})"; }

// A new key id on every call: `side` ("f" guarded, "b" bare) and a process-wide counter.
inline std::string next_id(std::string_view side) {
  static std::atomic<std::uint64_t> next{0};
  std::string id(side);
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, next.fetch_add(1)).ptr;
  id.append(digits, end);
  return id;
}

inline std::string replay_id(int i) { return "replay-" + std::to_string(i); }

// Runs in_flight coroutines of kPerCaller calls each on `io` until all are done; false when a
// call answered false.
template <class Call>
bool run_batch(net::io_context& io, int in_flight, Call call) {
  int done = 0;
  bool ok = true;
  for (int c = 0; c < in_flight; ++c) {
    net::co_spawn(
        io,
        [&, c]() -> net::awaitable<void> {
          for (int j = 0; j < kPerCaller; ++j) ok = (co_await call(c, j)) && ok;
          ++done;
        },
        net::detached);
  }
  while (done < in_flight) io.run_one();
  return ok;
}

// run_batch for the guard's timed loops: each caller awaits `start()` (the guard's own
// awaitable) in its loop and judges the Outcome with `check`, with no coroutine of the harness
// between it and the guard, as the bare twins have none between their callbacks and hiredis.
template <class Start, class Check>
bool run_guard_batch(net::io_context& io, int in_flight, Start start, Check check) {
  int done = 0;
  bool ok = true;
  for (int c = 0; c < in_flight; ++c) {
    net::co_spawn(
        io,
        [&]() -> net::awaitable<void> {
          for (int j = 0; j < kPerCaller; ++j) ok = check(co_await start()) && ok;
          ++done;
        },
        net::detached);
  }
  while (done < in_flight) io.run_one();
  return ok;
}

// Each registers its benchmarks when its server is named (IDEM_BENCH_REDIS_URI,
// IDEM_BENCH_PG_URI); false, with a line on stderr, when it is not (or cannot be used).
bool register_redis_benchmarks();
bool register_postgres_benchmarks();
// SQLite's: always registered when built, on files of their own (async_sqlite_bench.cpp).
void register_sqlite_benchmarks();
// The kernel's own round trip over loopback, the floor under a lone call (loopback_floor.cpp):
// always registered, it needs no server.
void register_floor_benchmarks();
// Drops what the PostgreSQL benchmarks created (their tables), after the run.
void finish_postgres_benchmarks();

}  // namespace idem_bench_async
