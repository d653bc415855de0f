#include "postgres/pg_waker.hpp"

#include <fcntl.h>
#include <libpq-fe.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <utility>

#include "postgres/pg_link.hpp"

namespace idem::postgres::detail {

namespace {

using std::chrono::milliseconds;

// A connection quiet this long is asked for a reply, so that a stalled one is found and replaced
// (its wakes would be lost until then; each waiter's bound still holds).
constexpr milliseconds kQuietCheck{5000};
constexpr milliseconds kCheckBudget{2000};
constexpr milliseconds kRetryPause{500};  // between a lost connection and the next connect

}  // namespace

PgWaker::PgWaker(std::string conninfo, milliseconds connect_budget, std::string channel)
    : conninfo_(std::move(conninfo)),
      connect_budget_(connect_budget),
      channel_(std::move(channel)) {
  if (::pipe2(stop_pipe_.data(), O_CLOEXEC | O_NONBLOCK) != 0) {
    throw std::runtime_error("idem: postgres: cannot make the wake listener's pipe");
  }
}

PgWaker::~PgWaker() {
  stop();
  ::close(stop_pipe_[0]);
  ::close(stop_pipe_[1]);
}

void PgWaker::stop() {
  std::thread listener;
  {
    std::lock_guard lock(mutex_);
    if (!stop_) {
      stop_ = true;
      tell_watches(nullptr);
    }
    listener = std::move(thread_);
  }
  changed_.notify_all();
  const char byte = 1;
  (void)!::write(stop_pipe_[1], &byte, 1);
  if (listener.joinable()) listener.join();
}

std::optional<PgWaker::Mark> PgWaker::listening(Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  if (!thread_.joinable() && !stop_) thread_ = std::thread([this] { run(); });
  if (!changed_.wait_until(lock, deadline, [&] { return listening_ || stop_; }) || stop_) {
    return std::nullopt;
  }
  return Mark{heard_, connection_};
}

std::optional<PgWaker::Mark> PgWaker::listening_now() {
  std::lock_guard lock(mutex_);
  if (!thread_.joinable() && !stop_) thread_ = std::thread([this] { run(); });
  if (!listening_ || stop_) return std::nullopt;
  return Mark{heard_, connection_};
}

void PgWaker::wait(const std::string& payload, Mark mark, Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  (void)changed_.wait_until(lock, deadline, [&] { return over_locked(payload, mark); });
}

bool PgWaker::over(const std::string& payload, Mark mark) {
  std::lock_guard lock(mutex_);
  return over_locked(payload, mark);
}

bool PgWaker::over_locked(const std::string& payload, Mark mark) const {
  return stop_ || connection_ != mark.connection || !listening_ || heard_since(payload, mark);
}

std::uint64_t PgWaker::watch(Watch watch) {
  std::lock_guard lock(mutex_);
  const std::uint64_t id = next_watch_++;
  watches_.emplace(id, std::move(watch));
  return id;
}

void PgWaker::unwatch(std::uint64_t id) {
  std::lock_guard lock(mutex_);
  watches_.erase(id);
}

void PgWaker::tell_watches(const std::string* heard) {
  for (auto& entry : watches_) entry.second(heard);
}

bool PgWaker::heard_since(const std::string& payload, Mark mark) const {
  const std::uint64_t oldest = heard_ - recent_.size();
  if (mark.heard < oldest) return true;  // dropped from recent_ unread: look again
  for (std::uint64_t i = mark.heard; i < heard_; ++i) {
    if (recent_[static_cast<std::size_t>(i - oldest)] == payload) return true;
  }
  return false;
}

void PgWaker::heard(std::string payload) {
  {
    std::lock_guard lock(mutex_);
    tell_watches(&payload);
    recent_.push_back(std::move(payload));
    if (recent_.size() > kKept) recent_.pop_front();
    ++heard_;
  }
  changed_.notify_all();
}

bool PgWaker::stopping() {
  std::lock_guard lock(mutex_);
  return stop_;
}

void PgWaker::run() {
  while (!stopping()) {
    try {
      listen_once();
    } catch (const std::exception&) {  // lost, refused or stalled: connect again
    }
    std::unique_lock lock(mutex_);
    if (listening_) {
      listening_ = false;
      tell_watches(nullptr);
      changed_.notify_all();  // the waiters of the lost connection look again
    }
    (void)changed_.wait_for(lock, kRetryPause, [&] { return stop_; });
  }
}

void PgWaker::listen_once() {
  PgLink link(conninfo_, connect_budget_);
  // The channel is the records table's name and a suffix: an identifier already (the prefix was
  // checked); quoted as one all the same.
  link.run(Query{.kind = Query::script, .sql = "LISTEN \"" + channel_ + "\""}, kCheckBudget);
  {
    std::lock_guard lock(mutex_);
    listening_ = true;
    ++connection_;
    tell_watches(nullptr);
  }
  changed_.notify_all();
  PGconn* conn = link.raw();
  auto last_heard = Clock::now();
  for (;;) {
    const auto quiet =
        std::chrono::duration_cast<milliseconds>(kQuietCheck - (Clock::now() - last_heard));
    std::array<pollfd, 2> fds{pollfd{.fd = PQsocket(conn), .events = POLLIN, .revents = 0},
                              pollfd{.fd = stop_pipe_[0], .events = POLLIN, .revents = 0}};
    const int ready =
        ::poll(fds.data(), fds.size(), static_cast<int>(std::max<long long>(quiet.count(), 0)));
    if (stopping()) return;
    if (ready == 0) {
      link.run(Query{.kind = Query::script, .sql = "SELECT 1"}, kCheckBudget);  // or throws
      last_heard = Clock::now();
    } else if (ready < 0) {
      continue;  // EINTR
    } else if (PQconsumeInput(conn) == 0) {
      throw LinkLost("idem: postgres: the wake listener's connection failed");
    } else {
      last_heard = Clock::now();
    }
    while (PGnotify* n = PQnotifies(conn)) {
      heard(n->extra != nullptr ? std::string(n->extra) : std::string());
      PQfreemem(n);
    }
    if (PQstatus(conn) != CONNECTION_OK) {
      throw LinkLost("idem: postgres: the wake listener's connection ended");
    }
  }
}

}  // namespace idem::postgres::detail
