#pragma once
// GroupCommitStore: concurrent callers' claims and commits coalesced into the batch steps of a
// store, so that many callers share one sync of the log. Header-only.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/batch_store.hpp"
#include "idem/detail/held_key_calls.hpp"
#include "idem/detail/wake_signal.hpp"
#include "idem/engine/sim_hooks.hpp"
#include "idem/result.hpp"
#include "idem/steps.hpp"
#include "idem/store.hpp"
#include "idem/store_stats.hpp"

namespace idem {

struct GroupCommitOptions {
  /// How long the caller that writes a group waits for more callers to join it (zero: it writes
  /// what has queued up at once). Trades each call's latency for larger groups.
  std::chrono::microseconds max_delay{0};
  std::size_t max_batch = 256;  ///< the most calls one group writes; more wait for the next group
  /// Groups written at the same time, callers spread over this many queues. 1 for SQLite (one
  /// writer per file); a few for PostgreSQL.
  std::size_t writers = 1;
  /// Groups of one queue written at the same time, each by its own caller on its own connection:
  /// with 2, the next group is sent while the previous one's commit is flushed. 1 for SQLite; 2
  /// for PostgreSQL.
  std::size_t in_flight = 1;
  /// How long a call may wait in the queue before a group takes it (zero: no bound but the
  /// store's own calls'). A call still queued at that point is answered errc::store_unavailable
  /// without being written, and no group writes it later.
  std::chrono::milliseconds max_queue_wait{0};
  /// How long a waiting caller stays runnable (giving the CPU away between looks) before it
  /// sleeps, when the lane's groups take that long or less (a group's moving average): on a few
  /// cores shared by many callers of a store written in this process (SQLite), a sleep and a
  /// wake-up per call were most of a grouped call's cost. Zero: sleep at once (a store across a
  /// network, whose groups leave the CPU idle).
  std::chrono::microseconds spin_wait{0};
};

/// What a GroupCommitStore's callers wait on; a test may give its own types with the same
/// members to run the callers on simulated time (tests/sim).
struct GroupCommitSync {
  using Clock = std::chrono::steady_clock;
  using Mutex = std::mutex;
  using ConditionVariable = std::condition_variable;
  using Semaphore = detail::WakeSignal;  // not std::binary_semaphore: see wake_signal.hpp
};

/// Wraps a BatchStore (SqliteStore or PostgresStore in lease mode, RedisStore) so that the claims
/// and commits of concurrent callers are written together, one group per step (docs/batches.md).
/// Each caller returns once the step carrying its call returned (for SQL, committed); a failed
/// step fails each of its calls with the store's error; a call that waited max_queue_wait in
/// the queue is answered store_unavailable, never written. Each call keeps the store's single-key
/// answer; abort, extend, rewind, steps and kept requests go to the store directly. Thread-safe;
/// the store must outlive it. Transactional SQL stores have no batches: use their own claims.
template <class S, class Sync = GroupCommitSync>
class GroupCommitStore : public detail::HeldKeyCalls<GroupCommitStore<S, Sync>, S> {
  static_assert(BatchStore<S>, "idem::GroupCommitStore<S>: S needs claim_batch and commit_batch");

 public:
  explicit GroupCommitStore(S& store, GroupCommitOptions options = {})
      : store_(store), options_(options) {
    if (options_.max_batch == 0 || options_.writers == 0 || options_.in_flight == 0) {
      throw std::invalid_argument(
          "idem::GroupCommitStore: max_batch, writers and in_flight must be > 0");
    }
    for (std::size_t i = 0; i < options_.writers; ++i) lanes_.push_back(std::make_unique<Lane>());
    if (options_.max_delay.count() < 0) options_.max_delay = std::chrono::microseconds{0};
    if (options_.max_queue_wait.count() < 0) options_.max_queue_wait = {};
    if (options_.spin_wait.count() < 0) options_.spin_wait = {};
  }
  GroupCommitStore(const GroupCommitStore&) = delete;
  GroupCommitStore& operator=(const GroupCommitStore&) = delete;

  Result<Claim> claim(const ClaimRequest& request) {
    Call call;
    call.claim = &request;
    bound(call);
    run(call);
    return std::move(*call.claimed);
  }

  Status commit(const Ticket& ticket, const Completion& completion) {
    Call call;
    const CommitRequest request{ticket, completion};
    call.commit = &request;
    bound(call);
    run(call);
    return std::move(*call.committed);
  }

  Status abort(const Ticket& ticket) { return store_.abort(ticket); }

  /// A batch is a group already: written at once, beside the groups.
  std::vector<Result<Claim>> claim_batch(std::span<const ClaimRequest> requests) {
    return store_.claim_batch(requests);
  }
  std::vector<Status> commit_batch(std::span<const CommitRequest> requests) {
    return store_.commit_batch(requests);
  }

  /// Groups written so far, and the calls they carried (their ratio is the mean group size).
  std::size_t groups() const noexcept { return groups_.load(std::memory_order_relaxed); }
  std::size_t grouped_calls() const noexcept {
    return grouped_calls_.load(std::memory_order_relaxed);
  }

  /// Calls queued now, not yet taken into a group; groups being written now; callers holding a
  /// writer's place now (writing a group or collecting calls for one).
  std::size_t queued() const {
    return sum_over_lanes([](const Lane& lane) { return lane.queue.size(); });
  }
  std::size_t groups_in_flight() const {
    return sum_over_lanes([](const Lane& lane) { return lane.in_flight; });
  }
  std::size_t writers() const {
    return sum_over_lanes([](const Lane& lane) { return lane.writing; });
  }

  /// The store's figures (when it has stats()) with the groups' in `group`.
  StoreStats stats() const {
    StoreStats s = stats_of(store_);
    s.group = GroupStats{.groups = groups(), .calls = grouped_calls()};
    return s;
  }

  S& store() noexcept { return store_; }

 private:
  friend detail::HeldKeyCalls<GroupCommitStore, S>;
  S& wrapped() noexcept { return store_; }

  template <class Count>
  std::size_t sum_over_lanes(Count count) const {
    std::size_t n = 0;
    for (const auto& lane : lanes_) {
      Lock lock(lane->mutex);
      n += count(*lane);
    }
    return n;
  }

  using Clock = typename Sync::Clock;
  using TimePoint = typename Clock::time_point;
  using ClockDuration = typename Clock::duration;
  using Lock = std::unique_lock<typename Sync::Mutex>;
  using Semaphore = typename Sync::Semaphore;

  // One caller's call, on its stack until it returns.
  struct Call {
    const ClaimRequest* claim = nullptr;    // a claim, or
    const CommitRequest* commit = nullptr;  // a commit
    std::optional<Result<Claim>> claimed;
    std::optional<Status> committed;
    // Under the lane's mutex: taken into a group; answered; its caller holds (or was handed) a
    // writer's place; its caller waits on `wake`; its caller was woken (once per wait).
    bool taken = false;
    bool done = false;
    bool lead = false;
    bool waiting = false;
    bool woken = false;
    std::uint64_t group = 0;  // the number of the group that answered it
    bool bounded = false;     // `deadline` is set: max_queue_wait
    TimePoint deadline{};     // answered without being written if still queued then
    Semaphore wake{0};
  };

  // One queue of calls and the callers writing its groups (at most in_flight at a time).
  struct Lane {
    typename Sync::Mutex mutex;
    typename Sync::ConditionVariable joined;  // writers collecting calls for their group
    std::deque<Call*> queue;
    std::size_t writing = 0;     // callers holding a writer's place
    std::size_t collecting = 0;  // of them, waiting for calls to join their group
    std::size_t in_flight = 0;   // groups being written
    std::size_t want = 0;        // calls a collecting writer waits for (0: none)
    // The callers of the last group answered that have not called again yet (one writer at a
    // time: the next group waits a little for them).
    std::uint64_t answered = 0;  // groups answered so far: the last one's number
    std::size_t returning = 0;
    TimePoint answered_at{};
    TimePoint last_start{};
    ClockDuration group_time{};  // moving averages of how long a group takes to write,
    double group_size = 1;       // and of the calls it carries
  };

  // Released after the lane's mutex is let go, so a woken caller does not block on it at once.
  using Wakes = std::vector<Semaphore*>;

  // Wakes a waiting caller, once (marked under the lane's mutex, released after it). A caller not
  // waiting sees its answer under the mutex before it returns: a release for it could come after
  // it returned, into a Call gone with its stack frame.
  static void wake(Call& c, Wakes& wakes) {
    if (!c.waiting || c.woken) return;
    c.woken = true;
    wakes.push_back(&c.wake);
  }

  static void release(Wakes& wakes) {
    for (Semaphore* w : wakes) w->release();
    wakes.clear();
  }

  void bound(Call& call) const {
    if (options_.max_queue_wait.count() == 0) return;
    call.bounded = true;
    call.deadline =
        Clock::now() + std::chrono::duration_cast<ClockDuration>(options_.max_queue_wait);
  }

  // Waits unlocked until the call is answered or handed a writer's place (true), or, while
  // `timed`, until its deadline (false); wakes `wakes` first. For `spin` it stays runnable
  // (yielding): a wait of about a group's time then costs no sleep and wake-up, which on a few
  // cores shared by many callers was most of a grouped call's cost (docs/batches.md).
  static bool wait(Lock& lock, Call& call, Wakes& wakes, bool timed, ClockDuration spin) {
    call.waiting = true;
    lock.unlock();
    release(wakes);
    bool woken = true;
    if (!take_spinning(call, timed, spin)) {
      if constexpr (requires { call.wake.try_acquire_until(call.deadline); }) {
        if (timed) {
          woken = call.wake.try_acquire_until(call.deadline);
        } else {
          call.wake.acquire();
        }
      } else {
        call.wake.acquire();
      }
    }
    lock.lock();
    if (!woken && call.woken) {
      // Woken as the deadline passed: the release is on its way, into this call's semaphore.
      lock.unlock();
      call.wake.acquire();
      lock.lock();
      woken = true;
    }
    call.waiting = false;
    call.woken = false;
    return woken;
  }

  // Spins for `spin` (not past a timed call's deadline) for the call's wake: true when taken.
  static bool take_spinning(Call& call, bool timed, ClockDuration spin) {
    if constexpr (requires { call.wake.try_acquire_spinning_until(call.deadline); }) {
      if (spin <= ClockDuration::zero()) return false;
      const TimePoint until = Clock::now() + spin;
      return call.wake.try_acquire_spinning_until(timed ? std::min(until, call.deadline) : until);
    } else {
      return false;
    }
  }

  // Waits until the call is answered or handed a writer's place; a call still queued at its
  // deadline leaves the queue answered (one taken into a group waits for the group's step).
  // A waiting caller spins for a group's moving average time when it is within spin_wait.
  void wait_turn(Lane& lane, Lock& lock, Call& call, Wakes& wakes) const {
    const auto most = std::chrono::duration_cast<ClockDuration>(options_.spin_wait);
    for (;;) {
      const ClockDuration spin = lane.group_time <= most ? lane.group_time : ClockDuration{};
      if (wait(lock, call, wakes, call.bounded && !call.taken, spin) || call.done || call.lead) {
        return;
      }
      if (call.taken) continue;
      std::erase(lane.queue, &call);
      answer_late(call);
      return;
    }
  }

  static bool late(const Call& call, TimePoint now) { return call.bounded && now >= call.deadline; }

  // The answer of a call that waited past its deadline before any group took it: not written.
  static void answer_late(Call& call) {
    constexpr std::string_view kLate =
        "idem: group commit: the call waited its whole bound (max_queue_wait) for the store's "
        "writer and was not written";
    call.done = true;
    if (call.commit != nullptr) {
      call.committed.emplace(Status(errc::store_unavailable, std::string(kLate)));
    } else {
      call.claimed.emplace(make_failure(errc::store_unavailable, std::string(kLate)));
    }
  }

  // Hands a writer's place to the first queued caller that has none; false when all have one.
  static bool hand_place(Lane& lane, Wakes& wakes) {
    for (Call* c : lane.queue) {
      if (c->lead) continue;
      c->lead = true;
      wake(*c, wakes);
      return true;
    }
    return false;
  }

  // Queues the call on a lane; writes the lane's groups while this caller holds a writer's
  // place, else waits for its answer or for a place.
  void run(Call& call) {
    Lane& lane = *lanes_[next_lane_.fetch_add(1, std::memory_order_relaxed) % lanes_.size()];
    Wakes wakes;
    Lock lock(lane.mutex);
    lane.queue.push_back(&call);
    // This thread's last call on this lane, if the last group answered carried it.
    thread_local struct {
      const Lane* lane = nullptr;
      std::uint64_t group = 0;
    } last;
    if (last.lane == &lane && last.group == lane.answered && lane.returning > 0) {
      if (--lane.returning == 0 && lane.collecting > 0) lane.joined.notify_all();
    }
    struct Remember {
      const Lane* lane;
      const Call& call;
      decltype(last)& into;
      ~Remember() { into = {lane, call.group}; }
    } remember{&lane, call, last};
    if (lane.writing >= options_.in_flight) {
      if (lane.collecting > 0 &&
          (lane.queue.size() >= options_.max_batch || lane.queue.size() == lane.want)) {
        lane.joined.notify_all();
      }
      wait_turn(lane, lock, call, wakes);
      if (!call.lead) return;  // answered
      // Handed the place of a writer that finished its own call with calls still queued (the
      // call may have been answered since, by another writer's group).
    } else {
      ++lane.writing;
      call.lead = true;
    }
    while (!call.done) {
      if (!call.taken) {
        collect(lane, lock, call);
        // Collecting let the lock go: another writer's group may have taken and answered the
        // call meanwhile, and nobody wakes a writer that then waited for it.
        if (call.done && !IDEM_SIM_MUTATE(23)) break;
      }
      if (lane.queue.empty()) {
        // This call is in a group another writer is writing: wait for it as anyone does.
        --lane.writing;
        call.lead = false;
        wait_turn(lane, lock, call, wakes);
        if (!call.lead) return;
        continue;
      }
      const std::size_t n = std::min(lane.queue.size(), options_.max_batch);
      std::vector<Call*> group(lane.queue.begin(),
                               lane.queue.begin() + static_cast<std::ptrdiff_t>(n));
      lane.queue.erase(lane.queue.begin(), lane.queue.begin() + static_cast<std::ptrdiff_t>(n));
      for (Call* c : group) c->taken = true;
      if (lane.collecting > 0) lane.joined.notify_all();  // their calls may be in this group
      // Calls whose deadline passed in the queue are answered, not written.
      const TimePoint taken_at = Clock::now();
      std::erase_if(group, [&](Call* c) {
        if (!late(*c, taken_at)) return false;
        answer_late(*c);
        if (c != &call) wake(*c, wakes);
        return true;
      });
      if (group.empty()) continue;  // nothing to write (the loop ends if this call was late)
      const std::size_t written = group.size();
      // Calls left over and a place free: the next group goes out beside this one.
      if (!lane.queue.empty() && lane.writing < options_.in_flight && hand_place(lane, wakes)) {
        ++lane.writing;
      }
      groups_.fetch_add(1, std::memory_order_relaxed);
      grouped_calls_.fetch_add(written, std::memory_order_relaxed);
      ++lane.in_flight;
      const TimePoint started = Clock::now();
      lane.last_start = started;
      lock.unlock();
      release(wakes);
      write(group);
      const ClockDuration took = Clock::now() - started;
      lock.lock();
      lane.group_time =
          lane.group_time == ClockDuration{} ? took : (lane.group_time * 7 + took) / 8;
      lane.group_size = (lane.group_size * 7 + static_cast<double>(group.size())) / 8;
      --lane.in_flight;
      if (lane.collecting > 0) lane.joined.notify_all();  // a place in flight is free
      for (Call* c : group) {
        c->done = true;
        c->group = lane.answered + 1;
      }
      ++lane.answered;
      lane.returning = group.size();
      lane.answered_at = Clock::now();
      // This caller's call answered: its place first goes to a queued caller, who writes the
      // next group (woken first, it is the first to run), or is given up.
      if (call.done) give_up_place(lane, call, wakes);
      for (Call* c : group) {
        if (c != &call) wake(*c, wakes);
      }
      if (call.done) {
        lock.unlock();
        release(wakes);
        return;
      }
    }
    give_up_place(lane, call, wakes);
    lock.unlock();
    release(wakes);
  }

  // The caller's call is answered: its writer's place goes to a queued caller or is given up.
  static void give_up_place(Lane& lane, Call& call, Wakes& wakes) {
    call.lead = false;
    if (!hand_place(lane, wakes)) --lane.writing;
  }

  // Before a writer takes its group: waits up to max_delay for more calls and, while other
  // groups of the lane are in flight, for the next group's turn (below). Ends early once the
  // queue holds max_batch calls or the caller's own call was taken by another writer.
  void collect(Lane& lane, Lock& lock, Call& call) {
    const TimePoint now = Clock::now();
    const TimePoint delayed = now + options_.max_delay;
    auto full = [&] { return call.taken || lane.queue.size() >= options_.max_batch; };
    if (full()) return;
    ++lane.collecting;
    if (options_.max_delay.count() > 0) {
      lane.joined.wait_until(lock, delayed, full);
    }
    if (options_.in_flight == 1 && lanes_.size() == 1 && lane.returning > 0 && !full()) {
      // One group at a time: the callers the last group answered likely call again at once;
      // waiting for them (at most half a group's time) merges them with those queued, instead of
      // groups alternating between the two halves (docs/batches.md).
      lane.joined.wait_until(lock, lane.answered_at + lane.group_time / 2,
                             [&] { return full() || lane.returning == 0; });
    }
    if (options_.in_flight > 1 && lane.in_flight > 0 && !full()) {
      // Overlapping groups (docs/batches.md): the next goes out no sooner than 1/in_flight of a
      // group's time after the last start, then once an average group has joined, a whole
      // group's time has passed, or no group is in flight.
      const auto k = static_cast<long>(options_.in_flight);
      lane.want = std::max<std::size_t>(1, static_cast<std::size_t>(std::lround(lane.group_size)));
      auto idle = [&] { return full() || lane.in_flight == 0; };
      lane.joined.wait_until(lock, lane.last_start + lane.group_time / k, idle);
      lane.joined.wait_until(lock, lane.last_start + lane.group_time,
                             [&] { return idle() || lane.queue.size() >= lane.want; });
      lane.want = 0;
    }
    --lane.collecting;
  }

  // Writes one group: its commits, then its claims (a claim then sees the commits of the same
  // group), in one step where the store has write_group, else one step each; a group of one
  // call, as the store's single call.
  void write(const std::vector<Call*>& group) noexcept {
    if (group.size() == 1) {
      // A call alone: the store's own single call, which costs less than a group's step.
      write_alone(*group.front());
      return;
    }
    std::vector<CommitRequest> commits;
    std::vector<Call*> committers;
    std::vector<ClaimRequest> claims;
    std::vector<Call*> claimers;
    try {
      for (Call* c : group) {
        if (c->commit != nullptr) {
          commits.push_back(*c->commit);
          committers.push_back(c);
        } else {
          claims.push_back(*c->claim);
          claimers.push_back(c);
        }
      }
      std::vector<Status> statuses;
      std::vector<Result<Claim>> answers;
      if constexpr (GroupStore<S>) {
        GroupAnswers written = store_.write_group(commits, claims);
        statuses = std::move(written.commits);
        answers = std::move(written.claims);
      } else {
        if (!commits.empty()) statuses = store_.commit_batch(commits);
        if (!claims.empty()) answers = store_.claim_batch(claims);
      }
      for (std::size_t i = 0; i < committers.size(); ++i) {
        committers[i]->committed.emplace(
            i < statuses.size() ? std::move(statuses[i])
                                : Status(errc::outcome_unknown,
                                         "idem: group commit: the store answered fewer commits "
                                         "than the group sent"));
      }
      for (std::size_t i = 0; i < claimers.size(); ++i) {
        if (i < answers.size()) {
          const std::size_t at = IDEM_SIM_MUTATE(14) ? claimers.size() - 1 - i : i;
          claimers[i]->claimed.emplace(std::move(answers[at]));
        } else {
          claimers[i]->claimed.emplace(make_failure(
              errc::store_unavailable,
              "idem: group commit: the store answered fewer claims than the group sent"));
        }
      }
    } catch (...) {
      // Out of memory building the group: every call not answered yet fails.
      for (Call* c : group) {
        if (c->commit != nullptr && !c->committed) {
          c->committed.emplace(
              Status(errc::outcome_unknown, "idem: group commit failed while writing the group"));
        } else if (c->claim != nullptr && !c->claimed) {
          c->claimed.emplace(make_failure(errc::store_unavailable,
                                          "idem: group commit failed while writing the group"));
        }
      }
    }
  }

  void write_alone(Call& c) noexcept {
    try {
      if (c.commit != nullptr) {
        c.committed.emplace(store_.commit(c.commit->ticket, c.commit->completion));
      } else {
        c.claimed.emplace(store_.claim(*c.claim));
      }
    } catch (...) {
      if (c.commit != nullptr) {
        c.committed.emplace(
            Status(errc::outcome_unknown, "idem: group commit failed while writing the call"));
      } else {
        c.claimed.emplace(make_failure(errc::store_unavailable,
                                       "idem: group commit failed while writing the call"));
      }
    }
  }

  S& store_;
  GroupCommitOptions options_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::atomic<std::size_t> next_lane_{0};
  std::atomic<std::size_t> groups_{0};
  std::atomic<std::size_t> grouped_calls_{0};
};

}  // namespace idem
