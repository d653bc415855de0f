#include "postgres/pg_async_wait.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <exception>
#include <utility>

namespace idem::postgres::detail {

namespace net = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

// What the listener's thread tells the waiting coroutine: a timer set to the deadline, which a
// notify() cancels through the wait's strand (the coroutine runs there too, so a notify() before
// the coroutine waits is kept, never lost).
class Signal : public std::enable_shared_from_this<Signal> {
 public:
  Signal(const net::any_io_executor& strand, Clock::time_point deadline)
      : timer_(strand, deadline) {}

  void notify() {
    net::post(timer_.get_executor(), [self = shared_from_this()] {
      self->told_ = true;
      self->timer_.cancel();
    });
  }

  /// Until a notify() since the last return, or the deadline. On the strand.
  net::awaitable<void> next() {
    if (!told_) {
      boost::system::error_code cancelled_or_expired;
      co_await timer_.async_wait(net::redirect_error(net::use_awaitable, cancelled_or_expired));
    }
    told_ = false;
  }

 private:
  net::steady_timer timer_;
  bool told_ = false;  // on the strand
};

// A watch on the waker for as long as it lives.
class Watching {
 public:
  Watching(PgWaker& waker, PgWaker::Watch watch)
      : waker_(waker), id_(waker.watch(std::move(watch))) {}
  ~Watching() { waker_.unwatch(id_); }
  Watching(const Watching&) = delete;
  Watching& operator=(const Watching&) = delete;

 private:
  PgWaker& waker_;
  std::uint64_t id_;
};

net::awaitable<void> wait(std::shared_ptr<PgWaker> waker, CountIn count_in,
                          Clock::time_point deadline,
                          std::shared_ptr<idem::detail::WaitCompletion> done) {
  const auto signal = std::make_shared<Signal>(co_await net::this_coro::executor, deadline);
  std::optional<PgWaker::Mark> mark;
  {
    // Listening before counting itself in: a wake sent once the count is in the record is heard.
    const Watching started(*waker, [signal](const std::string* heard) {
      if (heard == nullptr) signal->notify();
    });
    while (!(mark = waker->listening_now())) {
      if (waker->stopping() || Clock::now() >= deadline) {
        done->complete(true);
        co_return;
      }
      co_await signal->next();
    }
  }
  const std::optional<std::string> payload = co_await count_in();
  if (payload) {
    const Watching woken(*waker, [signal, expected = *payload](const std::string* heard) {
      if (heard == nullptr || *heard == expected) signal->notify();
    });
    while (!waker->over(*payload, *mark) && Clock::now() < deadline) co_await signal->next();
  }
  done->complete(true);
}

}  // namespace

void start_wait(const net::any_io_executor& executor, std::shared_ptr<PgWaker> waker,
                CountIn count_in, Clock::time_point deadline,
                const std::shared_ptr<idem::detail::WaitCompletion>& done) {
  // An exception (out of memory) ends the wait too: the caller claims again.
  net::co_spawn(net::make_strand(executor),
                wait(std::move(waker), std::move(count_in), deadline, done),
                [done](const std::exception_ptr&) { done->complete(true); });
}

}  // namespace idem::postgres::detail
