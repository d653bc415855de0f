#pragma once
// ConnectionPool: the connection pool of every compiled adapter (docs/stores.md#connection-pools):
// bounded, the warmest idle connection first, waiters served in arrival order, idle connections
// probed. Internal to the adapters. Thread-safe; the factory, closing and the probe run outside
// the lock.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/waiter_queue.hpp"
#include "idem/store_stats.hpp"

namespace idem::detail {

struct PoolOptions {
  /// Most connections open at once (idle, lent or being opened); at least 1.
  std::size_t max_open = 1;
  /// A connection idle at least this long is probed before it is lent; zero: every time.
  std::chrono::milliseconds probe_idle_after{0};
  /// Zero: a connection given back goes to the oldest waiter at once, in strict arrival order.
  /// Above zero: it goes to whoever asks first, so that a caller that gives it back and asks
  /// again goes on while it runs instead of waiting for a woken waiter to be scheduled, until the
  /// oldest waiter has been the oldest this long; then it is handed straight to that waiter
  /// (src/common/waiter_queue.hpp).
  std::chrono::microseconds fair_after{0};
};

/// What a pool did since it was made, and holds now.
struct PoolCounters {
  std::uint64_t opened = 0;     ///< connections the factory opened
  std::uint64_t reused = 0;     ///< acquires served by an idle (or handed-over) connection
  std::uint64_t discarded = 0;  ///< connections closed: given back broken, or failing the probe
  std::uint64_t waits = 0;      ///< acquires that found every connection busy and queued
  std::uint64_t timeouts = 0;   ///< acquires that gave up at their deadline (PoolExhausted)
  std::size_t in_use = 0;       ///< connections lent or being opened now
  std::size_t idle = 0;         ///< connections idle now
};

/// Every connection stayed busy until the acquire's deadline; adapters prefix their name.
class PoolExhausted : public std::runtime_error {
 public:
  PoolExhausted(std::size_t busy, std::chrono::milliseconds waited)
      : std::runtime_error("connection pool exhausted: all " + std::to_string(busy) +
                           " connections busy for " + std::to_string(waited.count()) + " ms"),
        busy_(busy),
        waited_(waited) {}

  std::size_t busy() const noexcept { return busy_; }
  std::chrono::milliseconds waited() const noexcept { return waited_; }

 private:
  std::size_t busy_;
  std::chrono::milliseconds waited_;
};

template <class Conn, class Deleter = std::default_delete<Conn>>
class ConnectionPool {
 public:
  using Clock = std::chrono::steady_clock;
  using Handle = std::unique_ptr<Conn, Deleter>;
  /// Opens a connection, by `open_by` if it can; throws on failure (a null handle fails too).
  using Factory = std::function<Handle(Clock::time_point open_by)>;
  /// Whether an idle connection is still usable, by a quick check; a throw counts as dead.
  using Probe = std::function<bool(Conn&)>;
  /// Readies a connection given back (a rollback) and says whether it can be lent again; a
  /// throw counts as "no".
  using Recycle = std::function<bool(Conn&)>;

  /// A lent connection; given back when the lease ends, closed instead if discard() was called.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept
        : pool_(std::exchange(other.pool_, nullptr)),
          conn_(std::move(other.conn_)),
          broken_(std::exchange(other.broken_, false)) {}
    Lease& operator=(Lease&& other) noexcept {
      if (this != &other) {
        reset();
        pool_ = std::exchange(other.pool_, nullptr);
        conn_ = std::move(other.conn_);
        broken_ = std::exchange(other.broken_, false);
      }
      return *this;
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { reset(); }

    Conn* get() const noexcept { return conn_.get(); }
    Conn& operator*() const noexcept { return *conn_; }
    Conn* operator->() const noexcept { return conn_.get(); }
    explicit operator bool() const noexcept { return conn_ != nullptr; }

    /// The connection is unusable: closed when the lease ends, its slot freed.
    void discard() noexcept { broken_ = true; }
    bool discarded() const noexcept { return broken_; }

    void reset() noexcept {  // gives the connection back now
      if (conn_) pool_->give_back(std::move(conn_), broken_);
      pool_ = nullptr;
      broken_ = false;
    }

   private:
    friend class ConnectionPool;
    Lease(ConnectionPool* pool, Handle conn) noexcept : pool_(pool), conn_(std::move(conn)) {}

    ConnectionPool* pool_ = nullptr;
    Handle conn_;
    bool broken_ = false;
  };

  ConnectionPool(PoolOptions options, Factory open, Probe probe = {}, Recycle recycle = {})
      : options_(options),
        factory_(std::move(open)),
        probe_(std::move(probe)),
        recycle_(std::move(recycle)) {
    if (options_.max_open == 0) options_.max_open = 1;
    // Room for every idle connection up front, so that the noexcept give_back() never allocates.
    idle_.reserve(std::min<std::size_t>(options_.max_open, 4096));
  }
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;
  /// Closes the idle connections; every lease must have ended.
  ~ConnectionPool() = default;

  /// An idle connection, else a new one below max_open, else the first given back before
  /// `deadline`; throws PoolExhausted, or what the factory throws. `probe_always`: probe however
  /// briefly it sat (for a commit whose lost reply would leave its outcome unknown).
  Lease acquire(Clock::time_point deadline, Clock::time_point open_by = Clock::time_point::max(),
                bool probe_always = false) {
    const auto start = Clock::now();
    Idle taken;
    {
      std::unique_lock lock(mutex_);
      // While anyone waits every slot is taken, and a connection is idle only for the oldest
      // waiter to take when it wakes: a caller passes it until it has waited fair_after.
      if (!idle_.empty() && waiters_.may_pass()) {
        taken = std::move(idle_.back());
        idle_.pop_back();
      } else if (open_ < options_.max_open) {
        ++open_;  // a slot to open a connection in
      } else {
        waits_.fetch_add(1, std::memory_order_relaxed);
        if (!wait_turn(lock, deadline, taken)) {
          timeouts_.fetch_add(1, std::memory_order_relaxed);
          const auto waited = std::chrono::ceil<std::chrono::milliseconds>(deadline - start);
          throw PoolExhausted(options_.max_open, std::max(waited, std::chrono::milliseconds{0}));
        }
      }
    }
    return lend(std::move(taken), open_by, probe_always);
  }

  PoolCounters counters() const noexcept {
    PoolCounters c;
    c.opened = opened_.load(std::memory_order_relaxed);
    c.reused = reused_.load(std::memory_order_relaxed);
    c.discarded = discarded_.load(std::memory_order_relaxed);
    c.waits = waits_.load(std::memory_order_relaxed);
    c.timeouts = timeouts_.load(std::memory_order_relaxed);
    std::lock_guard lock(mutex_);
    c.idle = idle_.size();
    c.in_use = open_ - idle_.size();
    return c;
  }

  PoolStats stats() const noexcept {
    const PoolCounters c = counters();
    return PoolStats{.size = options_.max_open,
                     .in_use = c.in_use,
                     .idle = c.idle,
                     .opened = c.opened,
                     .reused = c.reused,
                     .discarded = c.discarded,
                     .waits = c.waits,
                     .timeouts = c.timeouts};
  }

  const PoolOptions& options() const noexcept { return options_; }

 private:
  void give_back(Handle conn, bool broken) noexcept {
    if (!broken && conn && recycle_) broken = !recycled(*conn);
    if (broken || !conn) {
      if (conn) discarded_.fetch_add(1, std::memory_order_relaxed);
      conn.reset();  // outside the lock: closing may do I/O
      free_slot();
      return;
    }
    const auto now = Clock::now();
    std::lock_guard lock(mutex_);
    if (waiters_.front_due()) {
      hand_over(Idle{std::move(conn), now});
      return;
    }
    idle_.push_back(Idle{std::move(conn), now});
    // The oldest waiter takes it when it runs, unless a caller asks first.
    waiters_.wake_front();
  }

  bool recycled(Conn& conn) noexcept {
    try {
      return recycle_(conn);
    } catch (...) {
      return false;
    }
  }

  // An idle connection, or (conn null) a free slot to open one in.
  struct Idle {
    Handle conn;
    Clock::time_point since{};  // when it was given back
  };

  struct Waiter : QueuedWaiter {
    bool granted = false;  // set by hand_over(), under mutex_
    Idle grant;            // what hand_over() gave, under mutex_
  };

  // A taken connection (or slot) made into a lease; a dead one is replaced by the next idle one
  // or, in its slot, a new one.
  Lease lend(Idle taken, Clock::time_point open_by, bool probe_always) {
    for (;;) {
      if (taken.conn) {
        if (alive(taken, probe_always)) {
          reused_.fetch_add(1, std::memory_order_relaxed);
          return Lease(this, std::move(taken.conn));
        }
        taken.conn.reset();
        discarded_.fetch_add(1, std::memory_order_relaxed);
        std::lock_guard lock(mutex_);
        if (!idle_.empty()) {
          --open_;  // the closed one's slot; the idle one has its own
          taken = std::move(idle_.back());
          idle_.pop_back();
          continue;
        }
      }
      try {
        Handle conn = factory_(open_by);
        if (!conn) throw std::runtime_error("connection pool: the factory opened no connection");
        opened_.fetch_add(1, std::memory_order_relaxed);
        return Lease(this, std::move(conn));
      } catch (...) {
        free_slot();
        throw;
      }
    }
  }

  bool alive(const Idle& idle, bool probe_always) const noexcept {
    if (!probe_ || (!probe_always && Clock::now() - idle.since < options_.probe_idle_after)) {
      return true;
    }
    try {
      return probe_(*idle.conn);
    } catch (...) {
      return false;
    }
  }

  void free_slot() noexcept {  // the oldest waiter's, to open one in, or free
    std::lock_guard lock(mutex_);
    if (!waiters_.empty()) {
      hand_over(Idle{});
      return;
    }
    --open_;
  }

  void hand_over(Idle item) noexcept {  // to the oldest waiter, under mutex_
    Waiter& next = waiters_.pop_front();
    next.grant = std::move(item);
    next.granted = true;
    // Under the mutex: the waiter takes it again before it returns, so `next` outlives this.
    WaiterQueue<Waiter>::wake(next);
  }

  // Queues until a connection or slot is handed over, or (fair_after) the oldest waiter finds
  // one idle (true), or `deadline` passes (false).
  bool wait_turn(std::unique_lock<std::mutex>& lock, Clock::time_point deadline, Idle& taken) {
    Waiter me;
    const auto place = waiters_.enter(me);
    for (;;) {
      const bool timed_out = me.woken.wait_until(lock, deadline) == std::cv_status::timeout;
      me.notified = false;
      if (me.granted) {
        taken = std::move(me.grant);
        return true;
      }
      const bool oldest = waiters_.at_front(me);
      if (oldest && !idle_.empty()) {  // given back, and no caller came first
        waiters_.pop_front();
        taken = std::move(idle_.back());
        idle_.pop_back();
        return true;
      }
      if (timed_out) {
        waiters_.leave(place);
        // Given back meanwhile with only this waiter woken: the next one may take it.
        if (oldest && !idle_.empty()) waiters_.wake_front();
        return false;
      }
    }
  }

  PoolOptions options_;
  Factory factory_;
  Probe probe_;
  Recycle recycle_;
  mutable std::mutex mutex_;
  std::vector<Idle> idle_;  // a stack: the most recently given back on top
  WaiterQueue<Waiter> waiters_{options_.fair_after};  // each lives on its thread's stack
  std::size_t open_ = 0;                              // idle + lent + being opened
  std::atomic<std::uint64_t> opened_{0}, reused_{0}, discarded_{0}, waits_{0}, timeouts_{0};
};

}  // namespace idem::detail
