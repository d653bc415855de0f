#pragma once
// Calls with a bound on their duration, for tests of network faults: each call runs on a thread
// of its own; one still running past the bound is a test failure, and `unstick` (say, a relay
// that cuts every connection and refuses new ones) is then applied until every call has
// returned, so that a test that finds a hang fails instead of hanging.

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace idem::testing {

template <class R>
struct Timed {
  std::optional<R> result;  // set once the call returned
  std::chrono::milliseconds took{0};
};

template <class R>
std::vector<Timed<R>> run_bounded(const std::vector<std::function<R()>>& calls,
                                  std::chrono::milliseconds bound,
                                  const std::function<void()>& unstick) {
  using Clock = std::chrono::steady_clock;
  std::vector<Timed<R>> out(calls.size());
  std::mutex mutex;
  std::condition_variable done_cv;
  std::size_t done = 0;
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (std::size_t i = 0; i < calls.size(); ++i) {
    threads.emplace_back([&, i] {
      R r = calls[i]();
      std::lock_guard lock(mutex);
      out[i].result.emplace(std::move(r));
      out[i].took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
      ++done;
      done_cv.notify_all();
    });
  }
  std::unique_lock lock(mutex);
  if (!done_cv.wait_until(lock, start + bound, [&] { return done == calls.size(); })) {
    ADD_FAILURE() << calls.size() - done << " of " << calls.size() << " calls still running after "
                  << bound.count() << " ms";
    while (done < calls.size()) {
      lock.unlock();
      unstick();
      lock.lock();
      done_cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return done == calls.size(); });
    }
  }
  lock.unlock();
  for (auto& t : threads) t.join();
  return out;
}

/// One call.
template <class R>
Timed<R> run_bounded(std::function<R()> call, std::chrono::milliseconds bound,
                     const std::function<void()>& unstick) {
  return std::move(
      run_bounded<R>(std::vector<std::function<R()>>{std::move(call)}, bound, unstick)[0]);
}

}  // namespace idem::testing
