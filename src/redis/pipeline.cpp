// Automatic pipelining over a few shared connections (docs/redis.md, "Pipelining").

#include "pipeline.hpp"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <utility>

namespace idem::redis {

namespace {

using Clock = std::chrono::steady_clock;

// A connection idle this long is checked for a close by the server before it carries a command
// (as the pool does), so a restart does not cost the next caller its call.
constexpr auto kCheckIdleAfter = std::chrono::milliseconds{100};

// A caller awaiting its replies. It lives on the caller's stack and is reachable from a link's
// FIFO (once per command it sent) only while it waits. Guarded by the lane's mutex; `state`
// changes under its own mutex too, so that the caller sleeps on that one and, once done, leaves
// without touching the lane's mutex again (which the threads it would wake contend for).
struct Waiter {
  static constexpr int kYieldsBeforeSleeping = 16;
  // delivering: its replies are in, and the reader that took it off the FIFO will set done as
  // soon as it has let go of the lane's mutex.
  enum class State : std::uint8_t { waiting, read_turn, delivering, done };
  // Atomic: the caller reads it under the lane's mutex, and a reader sets `done` under `mutex`
  // alone.
  std::atomic<State> state{State::waiting};
  Clock::time_point deadline;
  std::size_t expected = 0;
  std::size_t received = 0;
  bool report_in_doubt = false;  // fail with outcome_unknown once the commands went out
  Pipeline::Replies replies;
  std::optional<Failure> failure;
  std::mutex mutex;
  std::condition_variable wake;

  // Notifies under `mutex`: the caller cannot leave (and destroy this) before that returns.
  void set(State s) {
    std::lock_guard lock(mutex);
    state = s;
    wake.notify_one();
  }
  // Without the lane's mutex: sleeps until the read turn or the replies come, or the deadline
  // passes (then returns `waiting`). Replies already on their way are waited for.
  State await() {
    // First a few turns of sched_yield(): when the cores are busy (the reader and the server
    // among the runnable threads), the caller stays runnable and finds its replies when its turn
    // comes, instead of sleeping and waiting for the scheduler once more after the reader's
    // wakeup. With a core to spare each yield returns at once, so this costs microseconds.
    for (int turn = 0; turn < kYieldsBeforeSleeping && state == State::waiting; ++turn) {
      if (Clock::now() >= deadline) break;
      sched_yield();
    }
    std::unique_lock lock(mutex);
    wake.wait_until(lock, deadline,
                    [this] { return state == State::done || state == State::read_turn; });
    if (state == State::delivering) wake.wait(lock, [this] { return state == State::done; });
    return state;
  }
};

// One connection and what is in flight on it: the wire's FIFO holds a caller once per command.
// Guarded by the lane's mutex, except the wire's reader, which only the holder of the read turn
// uses. Kept alive by every thread working on it, so a broken link's socket stays valid until
// its last user leaves.
struct Link {
  explicit Link(Socket s) : socket(std::move(s)) {}

  Socket socket;
  Wire<Waiter*> wire;
  bool writing = false;  // a caller is sending the wire's output
  bool reading = false;  // a caller holds the read turn
  bool broken = false;   // shut down; its calls have failed
  Clock::time_point last_used;
};

}  // namespace

class Pipeline::Lane {
 public:
  Lane(Pipeline& owner, std::chrono::milliseconds timeout, const std::string& where,
       const Connector& connect)
      : owner_(owner), timeout_(timeout), where_(where), connect_(connect) {}

  ~Lane() {
    std::lock_guard lock(mutex_);
    link_.reset();
  }

  Result<Replies> run(std::span<const std::span<const std::string_view>> commands,
                      Clock::time_point deadline, bool report_in_doubt) {
    callers_.fetch_add(1, std::memory_order_relaxed);
    struct Leave {
      std::atomic<std::size_t>& callers;
      ~Leave() { callers.fetch_sub(1, std::memory_order_relaxed); }
    } leave{callers_};
    Waiter call;
    std::unique_lock lock(mutex_);
    Result<std::shared_ptr<Link>> usable = link(lock, report_in_doubt);
    if (!usable) return std::move(usable).failure();
    const std::shared_ptr<Link> link = std::move(usable).value();
    const auto now = Clock::now();
    call.deadline = std::min(deadline, now + timeout_);
    call.expected = commands.size();
    call.report_in_doubt = report_in_doubt;
    link->last_used = now;
    for (std::span<const std::string_view> argv : commands) link->wire.queue(argv, &call);

    // With commands in flight, the reader sends these once replies come back, with whatever
    // else was queued meanwhile (read()).
    if (!link->writing && link->wire.in_flight() == 0) write(lock, *link, call.deadline);
    // The lane's mutex is held at the top of each round.
    while (call.state != Waiter::State::done) {
      if (call.state == Waiter::State::read_turn ||
          (call.state == Waiter::State::waiting && !link->reading)) {
        read(lock, *link, call);  // returns with `call` done
        break;
      }
      lock.unlock();
      const Waiter::State seen = call.await();
      if (seen == Waiter::State::done) break;  // final: the lane is not needed any more
      lock.lock();
      if (seen == Waiter::State::waiting && call.state == Waiter::State::waiting) {
        fail(*link, timed_out());  // the deadline passed with the reply still due
      }
    }
    // A reader may still be inside call.set(done), which holds call.mutex until it has notified:
    // `call` must outlive that.
    { std::lock_guard settled(call.mutex); }
    if (call.failure) return std::move(*call.failure);
    return std::move(call.replies);
  }

  /// Calls on this lane now (a hint for picking a lane).
  std::size_t callers() const noexcept { return callers_.load(std::memory_order_relaxed); }

  bool open() const {
    std::lock_guard lock(mutex_);
    return link_ != nullptr;
  }

 private:
  // The lane's connection, opened or replaced when needed. One caller connects at a time; the
  // others wait for its outcome instead of each trying in turn. `check_closed`: an idle link is
  // checked for a close by the server however briefly idle (a call in doubt once sent must not
  // go out on a connection that is already gone).
  Result<std::shared_ptr<Link>> link(std::unique_lock<std::mutex>& lock, bool check_closed) {
    if (link_ && link_->wire.awaiting() == 0 && !link_->writing &&
        (check_closed || Clock::now() - link_->last_used > kCheckIdleAfter) &&
        link_->socket.closed_by_server()) {
      fail(*link_, unavailable("connection closed by the server"));
    }
    if (link_) return link_;
    if (connecting_) {
      const std::uint64_t attempt = connect_attempts_;
      connected_.wait(lock, [&] { return !connecting_; });
      if (link_) return link_;
      if (connect_attempts_ != attempt && connect_failure_) return *connect_failure_;
    }
    connecting_ = true;
    lock.unlock();
    Result<Socket> opened = connect_();
    lock.lock();
    connecting_ = false;
    ++connect_attempts_;
    connected_.notify_all();
    if (!opened) {
      connect_failure_ = opened.failure();
      return std::move(opened).failure();
    }
    connect_failure_.reset();
    link_ = std::make_shared<Link>(std::move(opened).value());
    return link_;
  }

  // Sends what is queued, and what others queue meanwhile, until nothing is left or `deadline`
  // (the writer's own) passes.
  void write(std::unique_lock<std::mutex>& lock, Link& link, Clock::time_point deadline) {
    thread_local std::string batch;
    link.writing = true;
    while (link.wire.has_output() && !link.broken) {
      link.wire.take_output(batch);
      lock.unlock();
      const int error = link.socket.send_all(batch, deadline);
      lock.lock();
      if (error != 0) {
        fail(link,
             error == ETIMEDOUT ? timed_out() : io_error("send", link.socket.error_text(error)));
      }
    }
    link.writing = false;
  }

  // Holds the read turn: sends what was queued while commands were in flight, hands replies to
  // the calls at the head of the FIFO until `mine` has its own, then passes the turn to the
  // oldest call still waiting. Returns with the lane's mutex released and `mine` done. The
  // callers it served are woken outside the lane's mutex, so that they do not queue up on it
  // while the reader holds it.
  //
  // Commands queued while others are in flight wait for the reader: it writes them all at once
  // before each read, so that many callers' commands travel in one write. Over TLS this is what
  // batches them: each write is a record of its own, and the server decrypts and serves one
  // record per connection at a time, where over plain TCP it reads every byte that arrived.
  void read(std::unique_lock<std::mutex>& lock, Link& link, Waiter& mine) {
    link.reading = true;
    mine.state = Waiter::State::waiting;
    std::array<char, std::size_t{16} * 1024> buf;
    thread_local std::vector<ReplyPtr> replies;
    thread_local std::vector<Waiter*> served;
    auto wake_served = [] {
      for (Waiter* w : served) w->set(Waiter::State::done);
      served.clear();
    };
    while (mine.state == Waiter::State::waiting) {
      if (!link.writing) write(lock, link, mine.deadline);
      if (link.broken) break;  // the write failed, and mine with it
      // The oldest call's deadline bounds the wait: its reply is the next one due.
      const Clock::time_point deadline = link.wire.oldest()->deadline;
      lock.unlock();
      wake_served();
      int error = 0;
      const ssize_t got = link.socket.read_some(buf, deadline, error);
      bool unreadable = got > 0 && !link.wire.feed(buf.data(), static_cast<std::size_t>(got));
      for (ReplyPtr reply; got > 0 && !unreadable;) {
        const ReplyReader::Got next = link.wire.parse(reply);
        if (next == ReplyReader::Got::more) break;
        unreadable = next == ReplyReader::Got::broken;
        if (!unreadable) replies.push_back(std::move(reply));
      }
      lock.lock();
      hand_out(link, replies, mine, served);
      if (link.broken) break;  // mine failed with the others
      if (unreadable) {
        fail(link, unavailable("unreadable reply stream"));
      } else if (got == 0) {
        fail(link, unavailable(link.socket.closed_text()));
      } else if (got < 0) {
        fail(link,
             error == ETIMEDOUT ? timed_out() : io_error("read", link.socket.error_text(error)));
      }
    }
    // Commands queued since the last write go out now rather than once the next reader wakes
    // (still holding the read turn, so that no other caller takes it meanwhile).
    if (!link.broken && !link.writing) write(lock, link, mine.deadline);
    link.reading = false;
    if (!link.broken && link.wire.awaiting() != 0) {
      Waiter* next = link.wire.oldest();
      link.reading = true;
      next->set(Waiter::State::read_turn);
    }
    lock.unlock();
    wake_served();
  }

  // Gives each reply read to the oldest waiting call. A reply nobody waits for means the stream
  // is out of step: the link breaks rather than give anyone a reply that is not theirs.
  void hand_out(Link& link, std::vector<ReplyPtr>& replies, Waiter& mine,
                std::vector<Waiter*>& served) {
    for (ReplyPtr& reply : replies) {
      Waiter* call = nullptr;
      if (link.broken) continue;
      if (!link.wire.match(call)) {
        fail(link, unavailable("a reply nobody asked for"));
        continue;
      }
      call->replies[call->received++] = std::move(reply);
      if (call->received != call->expected) continue;
      if (call == &mine) {
        mine.state = Waiter::State::done;
      } else {
        std::lock_guard delivering(call->mutex);
        call->state = Waiter::State::delivering;
        served.push_back(call);
      }
    }
    replies.clear();
  }

  // Breaks the link: every call on it fails with `why`, the socket is shut down (a reader or
  // writer blocked on it returns at once), and the lane will open a new one. A call whose
  // commands went out and that asked for it fails with outcome_unknown instead.
  void fail(Link& link, const Failure& why) {
    if (link.broken) return;
    link.broken = true;
    link.socket.shut_down();
    link.wire.fail_all([&why](Waiter* call, bool written) {
      if (call->state == Waiter::State::done) return;  // a batch's waiter: once per command
      call->failure = lost_call(why, call->report_in_doubt, written);
      call->set(Waiter::State::done);
    });
    if (link_.get() == &link) link_.reset();
    owner_.dropped_.fetch_add(1, std::memory_order_relaxed);
  }

  Failure unavailable(std::string_view why) const {
    return make_failure(errc::store_unavailable, fmt::format("redis {}: {}", where_, why));
  }
  Failure timed_out() const {
    return unavailable(
        fmt::format("no reply within {} ms; the connection was dropped", timeout_.count()));
  }
  Failure io_error(std::string_view doing, const std::string& why) const {
    return unavailable(fmt::format("{} failed: {}", doing, why));
  }

  Pipeline& owner_;
  const std::chrono::milliseconds timeout_;
  const std::string& where_;
  const Connector& connect_;

  std::atomic<std::size_t> callers_{0};
  mutable std::mutex mutex_;
  std::shared_ptr<Link> link_;
  bool connecting_ = false;
  std::uint64_t connect_attempts_ = 0;
  std::optional<Failure> connect_failure_;
  std::condition_variable connected_;
};

Pipeline::Pipeline(std::size_t lanes, std::chrono::milliseconds command_timeout, std::string where,
                   Connector connect)
    : where_(std::move(where)), connect_(std::move(connect)) {
  lanes = std::max<std::size_t>(lanes, 1);
  command_timeout = std::max(command_timeout, std::chrono::milliseconds{1});
  lanes_.reserve(lanes);
  for (std::size_t i = 0; i < lanes; ++i) {
    lanes_.push_back(std::make_unique<Lane>(*this, command_timeout, where_, connect_));
  }
}

Pipeline::~Pipeline() = default;

Result<Pipeline::Replies> Pipeline::run(std::span<const std::span<const std::string_view>> commands,
                                        Clock::time_point deadline, bool report_in_doubt) {
  if (commands.empty() || commands.size() > kMaxBatch) {
    return make_failure(errc::store_unavailable,
                        fmt::format("redis {}: a batch holds 1 to {} commands", where_, kMaxBatch));
  }
  // The lane with the fewest calls on it, round robin among equals: as many callers as there
  // are lanes each get one of their own, like a blocking client with a connection per thread.
  const std::size_t start = next_lane_.fetch_add(1, std::memory_order_relaxed);
  std::size_t lane = start % lanes_.size();
  for (std::size_t i = 1; i < lanes_.size(); ++i) {
    const std::size_t other = (start + i) % lanes_.size();
    if (lanes_[other]->callers() < lanes_[lane]->callers()) lane = other;
  }
  return lanes_[lane]->run(commands, deadline, report_in_doubt);
}

Result<ReplyPtr> Pipeline::command(std::span<const std::string_view> argv,
                                   Clock::time_point deadline) {
  const std::array<std::span<const std::string_view>, 1> one{argv};
  Result<Replies> replies = run(one, deadline);
  if (!replies) return std::move(replies).failure();
  return std::move(replies.value()[0]);
}

std::size_t Pipeline::open_connections() const {
  return static_cast<std::size_t>(
      std::count_if(lanes_.begin(), lanes_.end(), [](const auto& lane) { return lane->open(); }));
}

}  // namespace idem::redis
