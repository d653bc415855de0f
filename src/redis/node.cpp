// Node: one server's connection pool (src/common/connection_pool.hpp) of blocking connections
// (socket.hpp), and Node::execute, the call that every command and script takes to reach a server.

#include "node.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <vector>

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

// A pool of `node`'s blocking connections, `max_open` of them at most.
ConnectionPool make_pool(const ConnectionOptions& options, const TlsContext* tls,
                         const std::string& where, std::size_t max_open) {
  return ConnectionPool(
      idem::detail::PoolOptions{.max_open = std::max<std::size_t>(max_open, 1),
                                .probe_idle_after = kCheckIdleAfter},
      [&options, tls, &where](Deadline open_by) {
        Result<BlockingConnection> c = BlockingConnection::open(options, tls, open_by, where);
        if (!c) throw ConnectFailed{std::move(c).failure()};
        return std::make_unique<BlockingConnection>(std::move(c).value());
      },
      [](BlockingConnection& c) { return !c.socket().closed_by_server(); },
      [](BlockingConnection& c) { return !c.broken(); });
}

}  // namespace

Node::Node(ConnectionOptions options, std::shared_ptr<const TlsContext> tls)
    : options_(with_a_pool(std::move(options))),
      tls_(std::move(tls)),
      where_(server_name(options_)),
      pool_(make_pool(options_, tls_.get(), where_, options_.pool_size)),
      waiters_(make_pool(options_, tls_.get(), where_, options_.wait_connections)) {
  if (options_.ignore_sigpipe) ignore_sigpipe_if_default();
  if (options_.pipeline_connections > 0) {
    pipeline_ = std::make_unique<Pipeline>(options_.pipeline_connections, options_.command_timeout,
                                           where_, [this]() -> Result<Socket> {
                                             auto c = BlockingConnection::open(
                                                 options_, tls_.get(), Deadline::max(), where_);
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

// A script call without WAIT, on the pipeline: [ASKING,] the call, in one batch. The rest uses
// the pool: WAIT would block the shared connection on the server for every call behind it, and
// a command may change its connection's state.
Result<Answer> Node::send(const Call& call, Deadline deadline) {
  static constexpr std::array<std::string_view, 1> kAsking{"ASKING"};
  if (pipeline_ && call.script != nullptr && call.wait_replicas <= 0) {
    const std::array<std::span<const std::string_view>, 2> batch{kAsking, call.argv};
    const std::size_t skip = call.asking ? 0 : 1;
    Result<Pipeline::Replies> replies =
        pipeline_->run(std::span(batch).subspan(skip), deadline, call.report_in_doubt);
    if (!replies) return std::move(replies).failure();
    // ASKING refused (a user without the right): its error is the call's answer.
    const bool refused = skip == 0 && replies.value()[0]->type == REDIS_REPLY_ERROR;
    return Answer{std::move(replies.value()[refused ? 0 : 1 - skip]), -1, where_};
  }
  // A call in doubt once sent is not sent on a connection the server already closed: that one
  // certainly never ran, and says store_unavailable.
  Result<ConnectionPool::Lease> conn = acquire(deadline, call.report_in_doubt);
  if (!conn) return std::move(conn).failure();
  BlockingConnection& c = *conn.value();
  const auto command = [&](std::span<const std::string_view> argv, bool in_doubt = false) {
    return c.command(argv, reply_by(options_, deadline), in_doubt);
  };
  if (call.asking) {
    Result<ReplyPtr> admitted = command(kAsking);
    if (!admitted) return std::move(admitted).failure();
    if (admitted.value()->type == REDIS_REPLY_ERROR) {  // refused: the call's answer
      return Answer{std::move(admitted).value(), -1, where_};
    }
  }
  Result<ReplyPtr> reply = command(call.argv, call.report_in_doubt);
  if (!reply) return std::move(reply).failure();
  Answer answer{std::move(reply).value(), -1, where_};
  if (call.wait_replicas > 0 && call.wrote != nullptr && call.wrote(*answer.reply)) {
    const WaitCommand wait(call.wait_replicas, call.wait_timeout);
    Result<ReplyPtr> acked = command(wait.argv);
    answer.acknowledged = acknowledged(acked ? acked.value().get() : nullptr);
  }
  return answer;
}

Result<Answer> Node::send_blocking(const Call& call, Deadline deadline) {
  static constexpr std::array<std::string_view, 1> kAsking{"ASKING"};
  if (options_.wait_connections == 0) {
    return unavailable(fmt::format("redis {}: no connection for blocking waits", where_));
  }
  const Deadline replies_by =
      std::min(deadline, Clock::now() + call.blocks_for + blocking_slack(options_));
  Result<ConnectionPool::Lease> conn = [&]() -> Result<ConnectionPool::Lease> {
    try {
      return waiters_.acquire(replies_by, replies_by);
    } catch (const idem::detail::PoolExhausted& e) {
      return unavailable(fmt::format("redis {}: wait connections: {}", where_, e.what()));
    } catch (ConnectFailed& e) {
      return std::move(e.failure);
    }
  }();
  if (!conn) return std::move(conn).failure();
  // ASKING admits the one command after it: each of the two gets its own.
  std::array<std::span<const std::string_view>, 4> batch{};
  std::size_t n = 0;
  if (call.asking) batch.at(n++) = kAsking;
  batch.at(n++) = call.argv;
  if (call.asking) batch.at(n++) = kAsking;
  batch.at(n++) = call.then;
  Result<ReplyPtr> reply = conn.value()->commands(std::span(batch).first(n), replies_by);
  if (!reply) return std::move(reply).failure();
  return Answer{std::move(reply).value(), -1, where_};
}

Result<Answer> Node::execute(const Call& call, Deadline deadline) {
  if (call.blocks_for.count() > 0) return send_blocking(call, deadline);
  Result<Answer> answer = send(call, deadline);
  if (!answer || call.script == nullptr || !is_error(*answer->reply, "NOSCRIPT")) return answer;
  // The server lost its script cache (SCRIPT FLUSH, a restart, a failover): EVAL with the
  // source runs the script and caches it again, as on the Asio face.
  std::vector<std::string_view> argv(call.argv.begin(), call.argv.end());
  argv.at(0) = "EVAL";
  argv.at(1) = call.script->source;
  Call again = call;
  again.argv = argv;
  return send(again, deadline);
}

}  // namespace idem::redis
