#pragma once
// The table the coordinator and its workers share through a mapped file: each worker slot's
// phase (so the chaos thread can kill a worker at a chosen point) and its next operation (so a
// restarted worker resumes where its killed predecessor stopped).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace idem::soak {

/// Where a worker is; the chaos thread aims its kills by it.
enum class Phase : int {
  idle = 0,
  claiming = 1,       // in guard.execute, before the handler (claim, or waiting on a holder)
  in_handler = 2,     // the handler runs; its effect is not complete
  before_commit = 3,  // the handler's effect and ledger row are written; the record is not
  after_call = 4,     // execute returned; the outcome is being logged
};
inline constexpr int kPhases = 5;
const char* to_string(Phase p);

inline constexpr int kMaxWorkers = 64;

struct SlotState {
  std::atomic<int> phase{0};
  std::atomic<std::int64_t> next_op{0};  // first operation the next process in this slot runs
  std::atomic<std::int64_t> end_op{0};   // one past its last operation
};

struct SharedTable {
  std::atomic<std::int64_t> deadline_ns{0};  // steady clock; no operation starts after it
  SlotState slots[kMaxWorkers];
};
static_assert(std::atomic<std::int64_t>::is_always_lock_free &&
                  std::atomic<int>::is_always_lock_free,
              "the table is shared between processes: its atomics must be lock-free");

/// Maps <path> (creating it when `create`); throws std::runtime_error on failure.
class SharedState {
 public:
  SharedState(const std::string& path, bool create);
  ~SharedState();
  SharedState(const SharedState&) = delete;
  SharedState& operator=(const SharedState&) = delete;
  SharedTable& table() { return *table_; }

 private:
  SharedTable* table_ = nullptr;
};

/// Nanoseconds on the steady clock (CLOCK_MONOTONIC: one timeline for every process).
inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace idem::soak
