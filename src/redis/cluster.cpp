// Redis Cluster for the blocking face: each try waits for its node (cluster.hpp).

#include "cluster.hpp"

#include <fmt/format.h>

#include <optional>
#include <thread>

namespace idem::redis {

namespace {

using Clock = std::chrono::steady_clock;

ClusterOptions checked(ClusterOptions options) {
  if (options.max_attempts < 1) options.max_attempts = 1;
  return options;
}

// Sleeps the pause before the next try; false when it would pass the call's deadline.
bool pause_before_retry(const Tries<Node>& tries) {
  const std::optional<std::chrono::milliseconds> pause = tries.pause();
  if (pause) std::this_thread::sleep_for(*pause);
  return pause.has_value();
}

}  // namespace

Cluster::Cluster(ClusterOptions options)
    : options_(checked(std::move(options))),
      topology_(options_.node, options_.seeds,
                OptionNames{"redis::Client", "ClusterOptions::node", "ClusterOptions::seeds"},
                [tls = TlsContext::make(options_.node.tls)](ConnectionOptions o) {
                  return std::make_unique<Node>(std::move(o), tls);
                }) {}

Cluster::~Cluster() = default;

Status Cluster::refresh(std::uint64_t seen, Deadline deadline, const Node* failed) {
  std::unique_lock lock(refresh_mutex_, deadline);
  if (!lock.owns_lock()) {
    return unavailable("redis cluster: the slot map is being re-read; the call ran out of time");
  }
  if (topology_.generation() != seen) return {};  // another call did it
  SlotMapRead<Node> read(topology_, failed);
  for (Node* n; Clock::now() < deadline && (n = read.next()) != nullptr;) {
    Result<Answer> answer = n->execute(Call{.argv = kClusterSlots}, deadline);
    if (answer) {
      read.answered(*answer->reply, n->options().host, n->where());
    } else {
      read.failed(answer.failure());
    }
  }
  if (!read.install()) return read.failure();
  return {};
}

Result<Answer> Cluster::execute(std::string_view key, Call call) {
  Tries<Node> tries;
  tries.start(key, options_.node);
  if (call.blocks_for.count() > 0) {  // a blocking call's own wait on top of the call's budget
    tries.budget += call.blocks_for;
    tries.deadline += call.blocks_for;
  }
  for (; tries.may_send(options_.max_attempts); ++tries.attempts) {
    tries.seen = topology_.generation();
    Node* target = tries.next(topology_, call.asking);
    if (target == nullptr) {
      Status refreshed = refresh(tries.seen, tries.deadline);
      target = topology_.owner(tries.slot);
      if (target == nullptr) {
        if (refreshed.ok()) {
          tries.no_owner();
        } else if (refreshed.failure().code == errc::config_invalid) {
          return refreshed.failure();  // a right to grant: no retry gets past it
        } else {
          tries.failed(refreshed.failure());
        }
        if (!pause_before_retry(tries)) break;
        continue;
      }
    }
    Result<Answer> answer = target->execute(call, tries.deadline);
    if (!answer) {
      // Down, unreachable or too slow: after a failover another node serves the slot.
      tries.failed(answer.failure());
      (void)refresh(tries.seen, tries.deadline, target);
      if (topology_.owner(tries.slot) == target && !pause_before_retry(tries)) break;
      continue;
    }
    const Tries<Node>::Next next = tries.on_reply(topology_, *answer->reply, answer->where);
    if (next.answer) return answer;
    if (next.read_map) (void)refresh(tries.seen, tries.deadline, next.ask_last ? target : nullptr);
    if (next.pause && !pause_before_retry(tries)) break;
  }
  return tries.give_up();
}

Status Cluster::ping() {
  const Deadline deadline = Clock::now() + call_budget(options_.node);
  if (topology_.generation() == 0) {
    Status loaded = refresh(0, deadline);
    if (!loaded) return loaded;
  }
  const std::vector<Node*> primaries = topology_.primaries();
  if (primaries.empty()) return unavailable("redis cluster: the slot map names no primary");
  static constexpr std::array<std::string_view, 1> kPing{"PING"};
  for (Node* n : primaries) {
    Result<Answer> answer = n->execute(Call{.argv = kPing}, deadline);
    if (!answer) return std::move(answer).failure();
    if (answer->reply->type == REDIS_REPLY_ERROR) {
      return error_reply_failure(*answer->reply, "PING", n->where());
    }
  }
  return {};
}

std::size_t Cluster::open_connections() const {
  std::size_t open = 0;
  topology_.for_each_node([&](const Node& n) { open += n.open_connections(); });
  return open;
}

std::uint64_t Cluster::dropped() const {
  std::uint64_t dropped = 0;
  topology_.for_each_node([&](const Node& n) { dropped += n.dropped(); });
  return dropped;
}

void Cluster::add_stats(PoolStats& pool, RedisStats& redis) const {
  topology_.for_each_node([&](const Node& n) { n.add_stats(pool, redis); });
  redis.moved += topology_.moved();
  redis.asked += topology_.asked();
  redis.slot_map_reads += topology_.generation();
}

}  // namespace idem::redis
