// Node: one server's connection pool (src/common/connection_pool.hpp) of blocking connections
// (socket.hpp), and Node::execute, the call that every command and script takes to reach a server.

#include "node.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "pipeline.hpp"
#include "sigpipe.hpp"

namespace idem::redis {

namespace {

using Clock = std::chrono::steady_clock;

// An idle connection that sat in the pool this long is checked for a close by the server before
// it is lent, so the caller's command does not fail on it; one returned moments ago is not worth
// the syscall.
constexpr auto kCheckIdleAfter = std::chrono::milliseconds{100};

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
            Result<BlockingConnection> c = BlockingConnection::open(options_, open_by, where_);
            if (!c) throw ConnectFailed{std::move(c).failure()};
            return std::make_unique<BlockingConnection>(std::move(c).value());
          },
          [](BlockingConnection& c) { return !c.socket().closed_by_server(); },
          [](BlockingConnection& c) { return !c.broken(); }) {
  if (options_.ignore_sigpipe) ignore_sigpipe_if_default();
  if (options_.pipeline_connections > 0) {
    pipeline_ = std::make_unique<Pipeline>(options_.pipeline_connections, options_.command_timeout,
                                           where_, [this]() -> Result<Socket> {
                                             auto c = BlockingConnection::open(
                                                 options_, Deadline::max(), where_);
                                             if (!c) return std::move(c).failure();
                                             return std::move(c).value().release();
                                           });
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

Result<ConnectionPool::Lease> Node::acquire(Deadline deadline, bool check_closed) {
  const auto wait_until = std::min<Deadline>(Clock::now() + options_.pool_wait, deadline);
  try {
    return pool_.acquire(wait_until, deadline, check_closed);
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
  Result<ConnectionPool::Lease> conn = acquire(deadline, call.report_in_doubt);
  if (!conn) return std::move(conn).failure();
  BlockingConnection& c = *conn.value();
  // Each command's reply is due within command_timeout, and by the call's deadline.
  const auto command = [&](std::span<const std::string_view> argv, bool in_doubt = false) {
    return c.command(argv, std::min(deadline, Clock::now() + options_.command_timeout), in_doubt);
  };
  const auto send = [&]() -> Result<ReplyPtr> {
    if (call.asking) {
      static constexpr std::array<std::string_view, 1> kAsking{"ASKING"};
      Result<ReplyPtr> admitted = command(kAsking);
      if (!admitted) return admitted;
    }
    return command(call.argv, call.report_in_doubt);
  };
  Result<ReplyPtr> reply = send();
  if (reply && call.script != nullptr && is_error(*reply.value(), "NOSCRIPT")) {
    // The server lost its script cache (SCRIPT FLUSH, restart, failover): load and retry once.
    const std::array<std::string_view, 3> load{"SCRIPT", "LOAD", call.script->source};
    Result<ReplyPtr> loaded = command(load);
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
    Result<ReplyPtr> acked = command(wait.argv);
    answer.acknowledged = acknowledged(acked ? acked.value().get() : nullptr);
  }
  return answer;
}

}  // namespace idem::redis
