// Redis Cluster for the blocking face: each try waits for its node (cluster.hpp).

#include "cluster.hpp"

#include <fmt/format.h>

#include <string>
#include <thread>

namespace idem::redis {

namespace {

using Clock = std::chrono::steady_clock;

// Pause before try `attempt`; false when it would pass the deadline.
bool pause_before_retry(int attempt, Deadline deadline) {
  const auto capped = retry_pause(attempt);
  if (Clock::now() + capped >= deadline) return false;
  std::this_thread::sleep_for(capped);
  return true;
}

ClusterOptions checked(ClusterOptions options) {
  if (options.max_attempts < 1) options.max_attempts = 1;
  return options;
}

}  // namespace

Cluster::Cluster(ClusterOptions options)
    : options_(checked(std::move(options))),
      topology_(options_.node, options_.seeds,
                OptionNames{"redis::Client", "ClusterOptions::node", "ClusterOptions::seeds"},
                [](ConnectionOptions o) { return std::make_unique<Node>(std::move(o)); }) {}

Cluster::~Cluster() = default;

Status Cluster::refresh(std::uint64_t seen, Deadline deadline, const Node* failed) {
  std::unique_lock lock(refresh_mutex_, deadline);
  if (!lock.owns_lock()) {
    return unavailable("redis cluster: the slot map is being re-read; the call ran out of time");
  }
  if (topology_.generation() != seen) return {};  // another call did it
  static constexpr std::array<std::string_view, 2> kSlotsCommand{"CLUSTER", "SLOTS"};
  std::string last = "redis cluster: no node to read the slot map from";
  BestMap<Node> best;
  for (Node* n : topology_.refresh_order(failed)) {
    if (Clock::now() >= deadline) break;
    Result<Answer> answer = n->execute(Call{.argv = kSlotsCommand}, deadline);
    if (!answer) {
      last = answer.failure().describe();
      continue;
    }
    std::optional<Topology<Node>::SlotMap> map =
        topology_.read(*answer->reply, n->options().host, n->where(), last);
    if (map && best.offer(std::move(*map))) break;
  }
  if (!best.install(topology_)) return unavailable(std::move(last));
  return {};
}

Result<Answer> Cluster::execute(std::string_view key, Call call) {
  const auto budget = options_.node.connect_timeout + options_.node.command_timeout;
  const Deadline deadline = Clock::now() + budget;
  Tries<Node> tries;
  tries.slot = key_slot(key);
  for (; tries.attempts < options_.max_attempts && Clock::now() < deadline; ++tries.attempts) {
    const std::uint64_t seen = topology_.generation();
    Node* target = tries.next(topology_, call.asking);
    if (target == nullptr) {
      Status refreshed = refresh(seen, deadline);
      target = topology_.owner(tries.slot);
      if (target == nullptr) {
        tries.failed(refreshed.ok() ? unavailable(fmt::format(
                                          "redis cluster: no node serves slot {}", tries.slot))
                                    : refreshed.failure());
        if (!pause_before_retry(tries.attempts, deadline)) break;
        continue;
      }
    }
    Result<Answer> answer = target->execute(call, deadline);
    if (!answer) {
      // Down, unreachable or too slow: after a failover another node serves the slot.
      tries.failed(answer.failure());
      (void)refresh(seen, deadline, target);
      if (topology_.owner(tries.slot) == target && !pause_before_retry(tries.attempts, deadline)) {
        break;
      }
      continue;
    }
    using Next = Tries<Node>::Next;
    switch (tries.on_reply(topology_, *answer->reply, answer->where)) {
      case Next::answer:
        return answer;
      case Next::resend:
        continue;
      case Next::refresh:
        (void)refresh(seen, deadline);
        continue;
      case Next::refresh_pause:
        (void)refresh(seen, deadline, target);
        [[fallthrough]];
      case Next::pause:
        if (!pause_before_retry(tries.attempts, deadline)) break;
        continue;
    }
    break;
  }
  return tries.give_up(budget);
}

Status Cluster::ping() {
  const Deadline deadline =
      Clock::now() + options_.node.connect_timeout + options_.node.command_timeout;
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
      return unavailable(fmt::format("redis {}: PING: {}", n->where(), text(*answer->reply)));
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
