#pragma once
// GroupCommitStore: concurrent callers' claims and commits coalesced into the batch steps of a
// store (one write transaction on SQLite, one statement on PostgreSQL), so that many callers
// share one sync of the log. Header-only.

#include <algorithm>
#include <atomic>
#include <chrono>
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
  /// How long the caller that writes a group waits for more callers to join it before it writes
  /// (zero: it writes what has queued up at once; callers that arrive meanwhile form the next
  /// group). A small delay trades each call's latency for larger groups.
  std::chrono::microseconds max_delay{0};
  /// The most calls one group writes; more wait for the next group.
  std::size_t max_batch = 256;
  /// Groups written at the same time: callers are spread over this many queues, each written
  /// by one caller at a time. 1 for SQLite, which has one writer per file anyway; a few for
  /// PostgreSQL, whose server also shares one log flush among concurrent commits.
  std::size_t writers = 1;
  /// Groups of one queue written at the same time, each by its own caller on its own
  /// connection: with 2, the next group is collected and sent while the previous one waits for
  /// its commit to be flushed, so that flushes overlap without splitting the callers over
  /// several queues. 1 for SQLite (one writer per file); 2 for PostgreSQL.
  std::size_t in_flight = 1;
};

/// What a GroupCommitStore's callers wait on: the standard library's clock, mutex and condition
/// variable, and a semaphore of idem's own. A test may give its own types with the same members, to
/// run the callers under a scheduler of its own (tests/sim runs them on simulated time).
struct GroupCommitSync {
  using Clock = std::chrono::steady_clock;
  using Mutex = std::mutex;
  using ConditionVariable = std::condition_variable;
  using Semaphore = detail::WakeSignal;  // not std::binary_semaphore: see wake_signal.hpp
};

/// Wraps a BatchStore (SqliteStore or PostgresStore in lease mode, RedisStore) so that the
/// claims and commits of concurrent callers are written together: the first caller to arrive
/// while no group is being written writes the queued calls (commits first, then claims) through
/// the store's commit_batch and claim_batch, and the callers that arrive meanwhile wait, in the
/// process, and form the next group, written by the first of them. Each caller returns once
/// the step that carried its call returned: for the SQL stores, once the transaction that wrote
/// it committed, as durable as the store's own commit (SQLite synchronous = FULL syncs it).
/// A step that fails fails each of its calls with the store's error, and writes none of them.
///
/// Each call keeps the store's single-key answer (fences, replays, mismatches, in_progress).
/// abort, extend, rewind, steps and kept requests go to the store directly. Thread-safe; holds a
/// reference to the store, which must outlive it. Transactional SQL stores have no batches (every
/// call would fail): use their own claims.
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
  }
  GroupCommitStore(const GroupCommitStore&) = delete;
  GroupCommitStore& operator=(const GroupCommitStore&) = delete;

  Result<Claim> claim(const ClaimRequest& request) {
    Call call;
    call.claim = &request;
    run(call);
    return std::move(*call.claimed);
  }

  Status commit(const Ticket& ticket, const Completion& completion) {
    Call call;
    const CommitRequest request{ticket, completion};
    call.commit = &request;
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

  // Semaphores to release once the lane's mutex is let go (a woken caller then does not
  // block on it at once).
  using Wakes = std::vector<Semaphore*>;

  // Wakes a waiting caller, once (marked under the lane's mutex, released after it). A caller
  // that is not waiting (a writer busy with another group) sees its answer under the mutex
  // before it returns; a release for it could come after it returned, into a Call gone with
  // its stack frame.
  static void wake(Call& c, Wakes& wakes) {
    if (!c.waiting || c.woken) return;
    c.woken = true;
    wakes.push_back(&c.wake);
  }

  static void release(Wakes& wakes) {
    for (Semaphore* w : wakes) w->release();
    wakes.clear();
  }

  // Waits, without the lock, until the call is answered or handed a writer's place; first
  // wakes the callers marked in `wakes`.
  static void wait(Lock& lock, Call& call, Wakes& wakes) {
    call.waiting = true;
    lock.unlock();
    release(wakes);
    call.wake.acquire();
    lock.lock();
    call.waiting = false;
    call.woken = false;
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
      wait(lock, call, wakes);
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
        wait(lock, call, wakes);
        if (!call.lead) return;
        continue;
      }
      const std::size_t n = std::min(lane.queue.size(), options_.max_batch);
      std::vector<Call*> group(lane.queue.begin(),
                               lane.queue.begin() + static_cast<std::ptrdiff_t>(n));
      lane.queue.erase(lane.queue.begin(), lane.queue.begin() + static_cast<std::ptrdiff_t>(n));
      for (Call* c : group) c->taken = true;
      if (lane.collecting > 0) lane.joined.notify_all();  // their calls may be in this group
      // Calls left over and a place free: the next group goes out beside this one.
      if (!lane.queue.empty() && lane.writing < options_.in_flight && hand_place(lane, wakes)) {
        ++lane.writing;
      }
      groups_.fetch_add(1, std::memory_order_relaxed);
      grouped_calls_.fetch_add(n, std::memory_order_relaxed);
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
      // One group at a time: the callers the last group answered are likely to call again at
      // once (a claim is followed by its commit); waiting a little for them merges them with the
      // callers already queued into one group, instead of groups alternating between the two.
      // Bounded by half a group's time from the answer; a lone caller is not waited for (it is
      // the caller itself). With several queues a caller's next call may go to another one.
      lane.joined.wait_until(lock, lane.answered_at + lane.group_time / 2,
                             [&] { return full() || lane.returning == 0; });
    }
    if (options_.in_flight > 1 && lane.in_flight > 0 && !full()) {
      // Overlapping groups: the next one goes out no sooner than 1/in_flight of a group's time
      // after the last one started, and then once as many calls as a group carries on average
      // have joined it, or a whole group's time after the last start, or when no group is in
      // flight any more (nothing left to overlap).
      const auto k = static_cast<long>(options_.in_flight);
      lane.want = std::max<std::size_t>(1, static_cast<std::size_t>(lane.group_size + 0.5));
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
