#pragma once
// What the benchmarks of bench/async share: the payload, the handler, the key ids, the batch
// runner that keeps N coroutines in flight on one io_context, and the parts: each store's
// benchmarks live in its backend's folder (bench/<backend>/async_<backend>_bench.cpp) and join
// the binary through a Part, which async_main.cpp asks to register itself.

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
#include <vector>

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

/// A store's benchmarks in idem_bench_async. `add` registers them and says whether it did: false,
/// with a line on stderr, when the store's server is not named in the environment (or cannot be
/// used). `finish`, if set, drops what they created, after the run.
struct Part {
  bool (*add)();
  void (*finish)() = nullptr;
};

/// The parts linked into the binary, in the order their files were initialised.
inline std::vector<Part>& parts() {
  static std::vector<Part> all;
  return all;
}

/// Adds `part`; true, for the initialiser of a static in the part's file.
inline bool add_part(Part part) {
  parts().push_back(part);
  return true;
}

// The kernel's own round trip over loopback, the floor under a lone call (loopback_floor.cpp):
// always registered, it needs no server.
void register_floor_benchmarks();

}  // namespace idem_bench_async
