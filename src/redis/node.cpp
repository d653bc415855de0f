// Node: one server's connection pool (src/common/connection_pool.hpp) over hiredis, and
// Node::execute, the call that every command and script takes to reach a server.

#include "node.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <sys/time.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>

#include "pipeline.hpp"
#include "sigpipe.hpp"

namespace idem::redis {

namespace {

using Clock = std::chrono::steady_clock;

timeval to_timeval(std::chrono::milliseconds ms) {
  const auto count = std::max<std::int64_t>(ms.count(), 1);
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(count / 1000);
  tv.tv_usec = static_cast<suseconds_t>((count % 1000) * 1000);
  return tv;
}

// `wanted`, cut to what is left before `deadline` (at least 1 ms: 0 would mean "no timeout").
std::chrono::milliseconds cut(std::chrono::milliseconds wanted, Deadline deadline) {
  if (deadline == Deadline::max()) return wanted;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(std::min(wanted, left), std::chrono::milliseconds{1});
}

// An idle connection must have nothing to read: readable means the server closed it (restart,
// idle timeout, CLIENT KILL). One that was idle for a while is checked before it is lent, so the
// caller's command does not fail on it; one returned moments ago is not worth the syscall.
constexpr auto kCheckIdleAfter = std::chrono::milliseconds{100};

bool closed_by_server(const redisContext& c) {
  pollfd p{c.fd, POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;
}

// A connect that failed, carried through the pool's factory to Node::acquire.
struct ConnectFailed {
  Failure failure;
};

ConnectionOptions with_a_pool(ConnectionOptions options) {
  if (options.pool_size == 0) options.pool_size = 1;
  return options;
}

}  // namespace

Node::Node(ConnectionOptions options)
    : options_(with_a_pool(std::move(options))),
      where_(server_name(options_)),
      pool_(
          idem::detail::PoolOptions{.max_open = options_.pool_size,
                                    .probe_idle_after = kCheckIdleAfter},
          [this](Deadline open_by) {
            Result<redisContext*> c = connect(open_by);
            if (!c) throw ConnectFailed{std::move(c).failure()};
            return ContextPool::Handle(c.value());
          },
          [](redisContext& c) { return !closed_by_server(c); }) {
  if (options_.ignore_sigpipe) ignore_sigpipe_if_default();
  if (options_.pipeline_connections > 0) {
    pipeline_ = std::make_unique<Pipeline>(options_.pipeline_connections, options_.command_timeout,
                                           where_, [this] { return connect(); });
  }
}

Node::~Node() = default;

std::size_t Node::open_connections() const {
  const std::size_t shared = pipeline_ ? pipeline_->open_connections() : 0;
  const idem::detail::PoolCounters pooled = pool_.counters();
  return pooled.in_use + pooled.idle + shared;
}

std::uint64_t Node::dropped() const noexcept {
  return pool_.counters().discarded + (pipeline_ ? pipeline_->dropped_connections() : 0);
}

void Node::add_stats(PoolStats& pool, RedisStats& redis) const {
  const PoolStats mine = pool_.stats();
  pool.size += mine.size;
  pool.in_use += mine.in_use;
  pool.idle += mine.idle;
  pool.opened += mine.opened;
  pool.reused += mine.reused;
  pool.discarded += mine.discarded;
  pool.waits += mine.waits;
  pool.timeouts += mine.timeouts;
  ++redis.servers;
  if (pipeline_) {
    redis.pipeline_connections += pipeline_->open_connections();
    redis.pipeline_dropped += pipeline_->dropped_connections();
  }
}

Result<redisContext*> Node::connect(Deadline deadline) {
  const timeval connect_tv = to_timeval(cut(options_.connect_timeout, deadline));
  redisContext* c = options_.unix_socket.empty()
                        ? redisConnectWithTimeout(options_.host.c_str(), options_.port, connect_tv)
                        : redisConnectUnixWithTimeout(options_.unix_socket.c_str(), connect_tv);
  if (c == nullptr) return unavailable(fmt::format("redis {}: out of memory connecting", where_));
  auto fail = [&](std::string why) {
    redisFree(c);
    return unavailable(fmt::format("redis {}: {}", where_, why));
  };
  if (c->err != 0) return fail(fmt::format("cannot connect: {}", c->errstr));
  if (redisSetTimeout(c, to_timeval(options_.command_timeout)) != REDIS_OK) {
    return fail("cannot set the command timeout");
  }
  if (options_.keep_alive && options_.unix_socket.empty()) (void)redisEnableKeepAlive(c);

  const Handshake handshake(options_);
  for (const std::vector<std::string_view>& argv : handshake.commands) {
    HiredisArgv args(argv);
    ReplyPtr r(
        static_cast<redisReply*>(redisCommandArgv(c, args.argc(), args.argv(), args.lens())));
    if (!r) return fail(fmt::format("{} failed: {}", argv[0], c->errstr));
    if (r->type == REDIS_REPLY_ERROR) return fail(fmt::format("{} refused: {}", argv[0], text(*r)));
  }
  return c;
}

Result<Connection> Node::acquire(Deadline deadline, bool check_closed) {
  const auto wait_until = std::min<Deadline>(Clock::now() + options_.pool_wait, deadline);
  try {
    return Connection(this, pool_.acquire(wait_until, deadline, check_closed));
  } catch (const idem::detail::PoolExhausted& e) {
    return unavailable(fmt::format("redis {}: {}", where_, e.what()));
  } catch (ConnectFailed& e) {
    return std::move(e.failure);
  }
}

// A script call without WAIT, on the pipeline: [ASKING,] the call; on NOSCRIPT, SCRIPT LOAD,
// [ASKING,] the call again, in one batch. The rest uses the pool: WAIT would block the shared
// connection on the server for every call behind it, and a command may change its state.
Result<Answer> Node::execute_pipelined(const Call& call, Deadline deadline) {
  static constexpr std::array<std::string_view, 1> kAsking{"ASKING"};
  const std::array<std::string_view, 3> load{"SCRIPT", "LOAD", call.script->source};
  const auto send = [&](bool reload) {
    std::array<std::span<const std::string_view>, 3> batch{};
    std::size_t n = 0;
    if (reload) batch[n++] = load;
    if (call.asking) batch[n++] = kAsking;
    batch[n++] = call.argv;
    return pipeline_->run({batch.data(), n}, deadline, call.report_in_doubt);
  };
  Result<Pipeline::Replies> replies = send(false);
  std::size_t last = call.asking ? 1 : 0;
  if (replies && is_error(*replies.value()[last], "NOSCRIPT")) {
    // The server lost its script cache (SCRIPT FLUSH, restart, failover): load and retry once.
    replies = send(true);
    if (replies && replies.value()[0]->type == REDIS_REPLY_ERROR) {
      return error_reply_failure(*replies.value()[0],
                                 fmt::format("loading script {}", call.script->name), where_);
    }
    ++last;
  }
  if (!replies) return std::move(replies).failure();
  return Answer{std::move(replies.value()[last]), -1, where_};
}

Result<Answer> Node::execute(const Call& call, Deadline deadline) {
  if (pipeline_ && call.script != nullptr && call.wait_replicas <= 0) {
    return execute_pipelined(call, deadline);
  }
  // A call in doubt once sent is not sent on a connection the server already closed: that one
  // certainly never ran, and says store_unavailable.
  Result<Connection> conn = acquire(deadline, call.report_in_doubt);
  if (!conn) return std::move(conn).failure();
  if (deadline != Deadline::max()) conn->limit(deadline);
  const auto send = [&]() -> Result<ReplyPtr> {
    if (call.asking) {
      static constexpr std::array<std::string_view, 1> kAsking{"ASKING"};
      Result<ReplyPtr> admitted = conn->command(kAsking);
      if (!admitted) return admitted;
    }
    return conn->command(call.argv, call.report_in_doubt);
  };
  Result<ReplyPtr> reply = send();
  if (reply && call.script != nullptr && is_error(*reply.value(), "NOSCRIPT")) {
    // The server lost its script cache (SCRIPT FLUSH, restart, failover): load and retry once.
    const std::array<std::string_view, 3> load{"SCRIPT", "LOAD", call.script->source};
    Result<ReplyPtr> loaded = conn->command(load);
    if (!loaded) return std::move(loaded).failure();
    if (loaded.value()->type == REDIS_REPLY_ERROR) {
      return error_reply_failure(*loaded.value(),
                                 fmt::format("loading script {}", call.script->name), where_);
    }
    reply = send();
  }
  if (!reply) return std::move(reply).failure();
  Answer answer{std::move(reply).value(), -1, where_};
  if (call.wait_replicas > 0 && call.wrote != nullptr && call.wrote(*answer.reply)) {
    const WaitCommand wait(call.wait_replicas, call.wait_timeout);
    Result<ReplyPtr> acked = conn->command(wait.argv);
    answer.acknowledged = acknowledged(acked ? acked.value().get() : nullptr);
  }
  return answer;
}

// --- A borrowed connection ---------------------------------------------------------------------

Connection::~Connection() {
  if (!lease_) return;
  if (shortened_ && lease_->err == 0 &&
      redisSetTimeout(lease_.get(), to_timeval(node_->options().command_timeout)) != REDIS_OK) {
    lease_->err = REDIS_ERR_OTHER;  // cannot restore its timeout: drop it
  }
  if (lease_->err != 0) lease_.discard();
  // The lease gives it back (or closes it) as it ends.
}

void Connection::limit(Deadline deadline) {
  const auto left = cut(node_->options().command_timeout, deadline);
  if (left >= node_->options().command_timeout) return;
  if (redisSetTimeout(lease_.get(), to_timeval(left)) == REDIS_OK) shortened_ = true;
}

Failure Connection::io_failure(std::string_view doing, bool report_in_doubt) const {
  // hiredis reports a read timeout as an I/O error with EAGAIN's text.
  const redisContext& c = *lease_;
  const bool timed_out = c.err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
  Failure failure =
      timed_out ? unavailable(fmt::format("redis {}: {} timed out after {} ms", node_->where(),
                                          doing, node_->options().command_timeout.count()))
                : unavailable(fmt::format("redis {}: {} failed: {}", node_->where(), doing,
                                          c.err == REDIS_ERR_EOF ? "connection closed by the server"
                                                                 : std::string_view(c.errstr)));
  // hiredis empties its output buffer once the whole command is written; bytes left in it mean
  // the command never went out whole, so the server cannot have run it.
  const bool written = c.obuf == nullptr || sdslen(c.obuf) == 0;
  return report_in_doubt && written ? reply_lost(std::move(failure)) : failure;
}

Result<ReplyPtr> Connection::command(std::span<const std::string_view> argv, bool report_in_doubt) {
  HiredisArgv args(argv);
  ReplyPtr reply(static_cast<redisReply*>(
      redisCommandArgv(lease_.get(), args.argc(), args.argv(), args.lens())));
  if (!reply) {
    return io_failure(argv.empty() ? std::string_view("command") : argv[0], report_in_doubt);
  }
  return reply;
}

}  // namespace idem::redis
