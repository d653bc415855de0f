
#include "postgres/pg_pipeline.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "postgres/pg_connect_failure.hpp"
#include "postgres/pg_failure.hpp"
#include "postgres/pg_options.hpp"

namespace idem::postgres::detail {

PipelineSettings pipeline_settings(const ConnectionOptions& connection, std::string where) {
  std::string conninfo = with_network_defaults(connection.uri);
  const std::chrono::milliseconds budget = connect_budget(conninfo, connection.connect_timeout);
  return PipelineSettings{.conninfo = std::move(conninfo),
                          .where = std::move(where),
                          .connect_budget = budget,
                          .reply_timeout = connection.statement_timeout + kReplyMargin};
}

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

}  // namespace

PgPipeline::PgPipeline(const net::any_io_executor& executor, PipelineSettings settings, Setup setup)
    : settings_(std::move(settings)),
      setup_(std::move(setup)),
      executor_(settings_.single_threaded ? executor
                                          : net::any_io_executor(net::make_strand(executor))),
      socket_(executor_),
      write_socket_(executor_),
      watchdog_(executor_),
      backoff_(settings_.reconnect_backoff) {}

PgPipeline::~PgPipeline() {
  release_socket();
  if (conn_ != nullptr) PQfinish(conn_);
}

void PgPipeline::close() {
  watchdog_.cancel();
  drop("the store was closed");
}

void PgPipeline::fail(Op& op, const std::string& why) const {
  op.reply.result.reset();
  op.reply.failure = make_failure(errc::store_unavailable,
                                  fmt::format("idem: postgres {}: {}", settings_.where, why));
  if (op.query.commit && op.went_out) {
    op.reply.failure.code = make_error_code(errc::outcome_unknown);
    op.reply.failure.message =
        "no reply to the commit; it may or may not have landed (a retry under the same fence "
        "finds it if it did): " +
        op.reply.failure.message;
  }
}

void PgPipeline::submit(std::unique_ptr<Op> op) {
  if (state_ == State::idle) {
    const auto now = Clock::now();
    if (now < next_connect_) {
      fail(*op, fmt::format("not connected ({}); the next attempt in {} ms", last_error_,
                            std::chrono::duration_cast<milliseconds>(next_connect_ - now).count()));
      op->complete();
      return;
    }
    waiting_.push_back(std::move(op));
    start_connect();
    return;
  }
  if (state_ != State::open) {
    waiting_.push_back(std::move(op));
    return;
  }
  send(std::move(op));
}

void PgPipeline::send_internal(Query query, std::function<void(Reply&)> done) {
  auto op = std::make_unique<InternalOp>();
  op->query = std::move(query);
  op->done = std::move(done);
  send(std::move(op));
}

void PgPipeline::send(std::unique_ptr<Op> op) {
  const int sent = send_query(conn_, op->query);
  op->went_out = sent == 1;
  const bool synced = sent == 1 && PQpipelineSync(conn_) == 1;
  if (in_flight_.empty()) last_progress_ = Clock::now();
  in_flight_.push_back(std::move(op));
  if (!synced) {
    drop(fmt::format("cannot send: {}", first_line(PQerrorMessage(conn_))));
    return;
  }
  flush();
  arm_watchdog();
}

void PgPipeline::start_connect() {
  conn_ = PQconnectStart(settings_.conninfo.c_str());
  ++generation_;
  opened_.fetch_add(1, std::memory_order_relaxed);
  if (conn_ == nullptr || PQstatus(conn_) == CONNECTION_BAD) {
    const std::string why = conn_ == nullptr
                                ? "out of memory"
                                : explain_connect_failure(conn_, first_line(PQerrorMessage(conn_)),
                                                          Clock::now() + settings_.connect_budget);
    drop(fmt::format("cannot connect: {}", why));
    return;
  }
  PQsetNoticeProcessor(
      conn_, [](void*, const char*) {}, nullptr);
  state_ = State::connecting;
  connect_started_ = Clock::now();
  arm_watchdog();
  poll_connect(PGRES_POLLING_WRITING);  // libpq's rule: start as if asked to write
}

void PgPipeline::poll_connect(PostgresPollingStatusType status) {
  if (status == PGRES_POLLING_OK) {
    connected();
    return;
  }
  if (status == PGRES_POLLING_FAILED) {
    // A refused certificate is looked at once more, blocking within what is left of the connect
    // budget: a handshake with a server that just answered one.
    drop(fmt::format("cannot connect: {}",
                     explain_connect_failure(conn_, first_line(PQerrorMessage(conn_)),
                                             connect_started_ + settings_.connect_budget)));
    return;
  }
  watch_socket();
  const bool read = status == PGRES_POLLING_READING;
  socket_.async_wait(
      read ? net::posix::stream_descriptor::wait_read : net::posix::stream_descriptor::wait_write,
      [self = shared_from_this(), g = generation_](boost::system::error_code ec) {
        if (ec || !self->current(g) || self->state_ != State::connecting) return;
        self->poll_connect(PQconnectPoll(self->conn_));
      });
}

void PgPipeline::watch_socket() {
  const int fd = PQsocket(conn_);
  if (socket_.is_open() && socket_.native_handle() == fd) return;
  release_socket();
  if (fd >= 0) socket_.assign(fd);
}

void PgPipeline::release_socket() {
  read_armed_ = write_armed_ = false;
  close_write_socket();
  if (!socket_.is_open()) return;
  boost::system::error_code ignored;
  socket_.cancel(ignored);
  (void)socket_.release();  // libpq owns and closes the socket
}

void PgPipeline::connected() {
  if (PQsetnonblocking(conn_, 1) != 0 || PQenterPipelineMode(conn_) != 1) {
    drop(fmt::format("cannot enter pipeline mode: {}", first_line(PQerrorMessage(conn_))));
    return;
  }
  // Registered afresh: the connect's write waits left "writable" in the reactor's interest (see
  // arm_write).
  release_socket();
  watch_socket();
  state_ = State::setting_up;
  arm_read();
  setup_(*this);
}

void PgPipeline::open() {
  state_ = State::open;
  backoff_ = settings_.reconnect_backoff;
  std::deque<std::unique_ptr<Op>> waiting = std::move(waiting_);
  const std::uint64_t g = generation_;
  for (auto& op : waiting) {
    if (!current(g)) {
      fail(*op, last_error_);
      op->complete();
      continue;
    }
    send(std::move(op));
  }
}

void PgPipeline::arm_read() {
  if (read_armed_ || !socket_.is_open()) return;
  read_armed_ = true;
  socket_.async_wait(net::posix::stream_descriptor::wait_read,
                     [self = shared_from_this(), g = generation_](boost::system::error_code ec) {
                       if (!self->current(g)) return;
                       self->read_armed_ = false;
                       if (ec) return;
                       self->on_readable();
                     });
}

// The wait is on a duplicate descriptor, closed once writable: "writable" in the edge-triggered
// interest of the connection's own would wake the loop at every read wait for the rest of its life.
void PgPipeline::arm_write() {
  if (write_armed_ || !socket_.is_open()) return;
  net::posix::stream_descriptor* waiter = &socket_;
  const int fd = ::fcntl(socket_.native_handle(), F_DUPFD_CLOEXEC, 0);
  if (fd >= 0) {
    boost::system::error_code failed;
    write_socket_.assign(fd, failed);
    if (failed) {
      ::close(fd);
    } else {
      waiter = &write_socket_;
    }
  }
  write_armed_ = true;
  waiter->async_wait(net::posix::stream_descriptor::wait_write,
                     [self = shared_from_this(), g = generation_](boost::system::error_code ec) {
                       if (!self->current(g)) return;
                       self->write_armed_ = false;
                       self->close_write_socket();
                       if (ec) return;
                       self->flush();
                     });
}

void PgPipeline::close_write_socket() {
  if (!write_socket_.is_open()) return;
  boost::system::error_code ignored;
  write_socket_.close(ignored);  // ours: the duplicate
}

void PgPipeline::flush() {
  const int left = PQflush(conn_);
  if (left < 0) {
    drop(fmt::format("cannot send: {}", first_line(PQerrorMessage(conn_))));
    return;
  }
  flushing_ = left == 1;
  if (flushing_) arm_write();  // and the read wait libpq may need meanwhile is always armed
}

void PgPipeline::on_readable() {
  const std::uint64_t g = generation_;
  if (PQconsumeInput(conn_) == 0) {
    drop(fmt::format("connection lost: {}", first_line(PQerrorMessage(conn_))));
    return;
  }
  Answered answered = std::move(spare_answered_);  // its room kept from the last read
  answered.clear();
  take_results(answered);
  if (current(g)) {
    if (PQstatus(conn_) == CONNECTION_BAD) {
      drop(fmt::format("connection lost: {}", first_line(PQerrorMessage(conn_))));
    } else {
      if (flushing_) flush();
      if (current(g)) arm_read();
    }
  }
  complete_answered(answered);
  answered.clear();
  spare_answered_ = std::move(answered);
}

// In order: the front query's result, a null, its sync point's. Callers complete once all is read.
void PgPipeline::take_results(Answered& answered) {
  const std::uint64_t g = generation_;
  int nulls = 0;
  while (current(g) && !in_flight_.empty() && PQisBusy(conn_) == 0) {
    PGresult* r = PQgetResult(conn_);
    if (r == nullptr) {
      if (++nulls > 1) break;  // between results: wait for more input
      continue;
    }
    nulls = 0;
    Op& op = *in_flight_.front();
    const ExecStatusType status = PQresultStatus(r);
    if (status == PGRES_PIPELINE_SYNC) {
      PQclear(r);
      finish_front(answered);
      continue;
    }
    if (op.answered) {
      PQclear(r);
      continue;
    }
    op.answered = true;
    if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) {
      const char* affected = PQcmdTuples(r);
      op.reply.affected = *affected != '\0' ? std::atoll(affected) : 0;
      op.reply.result.reset(r);  // its rows are read in place by the caller
      continue;
    }
    const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    op.reply.sqlstate = state != nullptr ? state : "";
    bool ended = false;  // finish_front() drops a connection the server is ending
    op.reply.failure =
        status == PGRES_PIPELINE_ABORTED
            ? make_failure(
                  errc::store_unavailable,
                  fmt::format("idem: postgres {}: an earlier statement failed", settings_.where))
            : statement_failure(op.reply.sqlstate, first_line(PQresultErrorMessage(r)),
                                /*transactional_claim=*/false, ended);
    PQclear(r);
  }
}

void PgPipeline::finish_front(Answered& answered) {
  std::unique_ptr<Op> op = std::move(in_flight_.front());
  in_flight_.pop_front();
  last_progress_ = Clock::now();
  // A connection the server is ending (08, 57P): what was on it is in doubt.
  const std::string& s = op->reply.sqlstate;
  const bool gone = s.rfind("08", 0) == 0 || s.rfind("57P", 0) == 0;
  if (gone) {
    const std::string why = op->reply.failure.message;
    in_flight_.push_front(std::move(op));
    drop(why);
    return;
  }
  if (op->internal) {
    op->complete();  // the setup's next step goes out now
    return;
  }
  if (op->again()) {
    send(std::move(op));
    return;
  }
  answered.push_back(std::move(op));
}

// On one thread callers resume here in turn, else are posted; if one throws, the rest are posted.
void PgPipeline::complete_answered(Answered& answered) {
  if (!settings_.single_threaded) {
    for (auto& op : answered) op->complete();
    return;
  }
  std::size_t next = 0;
  struct PostTheRest {
    Answered& ops;
    std::size_t& next;
    ~PostTheRest() {
      for (; next < ops.size(); ++next) ops[next]->complete();
    }
  } rest{answered, next};
  while (next < answered.size()) {
    std::unique_ptr<Op> op = std::move(answered[next++]);
    op->complete_in_place();
  }
}

void PgPipeline::drop(const std::string& why) {
  if (conn_ == nullptr && in_flight_.empty() && waiting_.empty()) return;
  ++generation_;
  release_socket();
  if (conn_ != nullptr) PQfinish(conn_);
  conn_ = nullptr;
  state_ = State::idle;
  flushing_ = false;
  last_error_ = why;
  failed_attempt();
  std::deque<std::unique_ptr<Op>> ops = std::move(in_flight_);
  for (auto& w : waiting_) ops.push_back(std::move(w));
  waiting_.clear();
  for (auto& op : ops) {
    fail(*op, why);
    op->complete();
  }
}

void PgPipeline::failed_attempt() {
  next_connect_ = Clock::now() + backoff_;
  backoff_ = std::min(backoff_ * 2, settings_.max_reconnect_backoff);
}

void PgPipeline::arm_watchdog() {
  if (watchdog_armed_) return;
  const milliseconds limit = settings_.connect_budget.count() > 0
                                 ? std::min(settings_.reply_timeout, settings_.connect_budget)
                                 : settings_.reply_timeout;
  watchdog_armed_ = true;
  watchdog_.expires_after(std::max(milliseconds{1}, limit / 4));
  watchdog_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    self->watchdog_armed_ = false;
    if (ec || self->conn_ == nullptr) return;
    const auto now = Clock::now();
    const PipelineSettings& s = self->settings_;
    if (self->state_ != State::open && s.connect_budget.count() > 0 &&
        now - self->connect_started_ > s.connect_budget) {
      self->drop(fmt::format("connecting took more than {} ms", s.connect_budget.count()));
      return;
    }
    if (!self->in_flight_.empty() && now - self->last_progress_ > s.reply_timeout) {
      self->drop(
          fmt::format("no reply within {} ms; connection dropped (a statement on its "
                      "way may or may not have run)",
                      s.reply_timeout.count()));
      return;
    }
    if (!self->in_flight_.empty() || self->state_ != State::open) self->arm_watchdog();
  });
}

}  // namespace idem::postgres::detail
