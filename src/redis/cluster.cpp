// Redis Cluster routing: key slots, the slot map, and redirections.

#include "cluster.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

namespace idem::redis {

namespace {

using Clock = std::chrono::steady_clock;

Failure unavailable(std::string message) {
  return make_failure(errc::store_unavailable, std::move(message));
}

// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), Redis Cluster's key hash.
constexpr std::array<std::uint16_t, 256> kCrc16 = [] {
  std::array<std::uint16_t, 256> table{};
  for (unsigned i = 0; i < 256; ++i) {
    auto crc = static_cast<std::uint16_t>(i << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = static_cast<std::uint16_t>((crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    table[i] = crc;
  }
  return table;
}();

std::uint16_t crc16(std::string_view bytes) noexcept {
  std::uint16_t crc = 0;
  for (const char c : bytes) {
    crc = static_cast<std::uint16_t>((crc << 8) ^
                                     kCrc16[((crc >> 8) ^ static_cast<unsigned char>(c)) & 0xff]);
  }
  return crc;
}

// Pause before try `attempt` (1 ms, doubling, at most 100 ms); false when it would pass the
// deadline.
bool pause_before_retry(int attempt, Deadline deadline) {
  const auto capped = retry_pause(attempt);
  if (Clock::now() + capped >= deadline) return false;
  std::this_thread::sleep_for(capped);
  return true;
}

std::string_view text(const redisReply& r) { return {r.str, r.len}; }

}  // namespace

std::chrono::milliseconds retry_pause(int attempt) noexcept {
  const auto pause = std::chrono::milliseconds{1 << std::clamp(attempt, 0, 7)};
  return std::min<std::chrono::milliseconds>(pause, std::chrono::milliseconds{100});
}

std::string node_address(std::string_view host, int port) {
  return host.find(':') != std::string_view::npos ? fmt::format("[{}]:{}", host, port)
                                                  : fmt::format("{}:{}", host, port);
}

std::optional<std::vector<SlotRange>> parse_cluster_slots(const redisReply& r,
                                                          std::string_view from_host) {
  if (r.type != REDIS_REPLY_ARRAY) return std::nullopt;
  std::vector<SlotRange> ranges;
  ranges.reserve(r.elements);
  for (std::size_t i = 0; i < r.elements; ++i) {
    const redisReply& range = *r.element[i];
    if (range.type != REDIS_REPLY_ARRAY || range.elements < 3 ||
        range.element[0]->type != REDIS_REPLY_INTEGER ||
        range.element[1]->type != REDIS_REPLY_INTEGER ||
        range.element[2]->type != REDIS_REPLY_ARRAY || range.element[2]->elements < 2) {
      return std::nullopt;
    }
    const long long first = range.element[0]->integer;
    const long long last = range.element[1]->integer;
    const redisReply& primary = *range.element[2];
    if (first < 0 || last < first || last >= static_cast<long long>(kSlots) ||
        primary.element[1]->type != REDIS_REPLY_INTEGER) {
      return std::nullopt;
    }
    std::string host = primary.element[0]->type == REDIS_REPLY_STRING
                           ? std::string(text(*primary.element[0]))
                           : std::string{};
    if (host.empty() || host == "?") host = std::string(from_host);
    ranges.push_back(SlotRange{.first = static_cast<std::uint16_t>(first),
                               .last = static_cast<std::uint16_t>(last),
                               .host = std::move(host),
                               .port = static_cast<int>(primary.element[1]->integer)});
  }
  return ranges;
}

std::uint16_t key_slot(std::string_view key) noexcept {
  const auto open = key.find('{');
  if (open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return static_cast<std::uint16_t>(crc16(key) & (kSlots - 1));
}

std::optional<Redirect> parse_redirect(const redisReply& reply) {
  Redirect r;
  std::string_view rest;
  if (is_error(reply, "MOVED ")) {
    rest = text(reply).substr(6);
  } else if (is_error(reply, "ASK ")) {
    r.ask = true;
    rest = text(reply).substr(4);
  } else {
    return std::nullopt;
  }
  const auto space = rest.find(' ');
  const auto colon = rest.rfind(':');
  if (space == std::string_view::npos || colon == std::string_view::npos || colon < space) {
    return std::nullopt;
  }
  unsigned slot = 0;
  const std::string_view slot_text = rest.substr(0, space);
  const std::string_view port_text = rest.substr(colon + 1);
  if (std::from_chars(slot_text.data(), slot_text.data() + slot_text.size(), slot).ec !=
          std::errc{} ||
      slot >= kSlots ||
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), r.port).ec !=
          std::errc{}) {
    return std::nullopt;
  }
  r.slot = static_cast<std::uint16_t>(slot);
  std::string_view host = rest.substr(space + 1, colon - space - 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  r.host = std::string(host);
  return r;
}

Cluster::Cluster(ClusterOptions options) : options_(std::move(options)) {
  if (options_.max_attempts < 1) options_.max_attempts = 1;
  // Options no cluster allows are a programming error, refused here rather than answered as an
  // outage on every call.
  const auto refuse = [](std::string_view why) {
    return std::invalid_argument(fmt::format("idem::redis::Client: a cluster {}", why));
  };
  if (options_.node.db != 0) throw refuse("has only database 0 (ClusterOptions::node.db)");
  if (!options_.node.unix_socket.empty()) {
    throw refuse("is reached over TCP (ClusterOptions::node.unix_socket must be empty)");
  }
  if (options_.seeds.empty()) throw refuse("needs seed nodes (ClusterOptions::seeds is empty)");
  std::vector<ConnectionOptions> seeds;
  for (const std::string& seed : options_.seeds) {
    Result<ConnectionOptions> parsed = ConnectionOptions::from_uri("redis://" + seed);
    if (!parsed || parsed->db != 0) throw refuse(fmt::format("seed '{}' is not host:port", seed));
    seeds.push_back(std::move(parsed).value());
  }
  for (const ConnectionOptions& seed : seeds) seeds_.push_back(&node(seed.host, seed.port));
}

Cluster::~Cluster() = default;

Node& Cluster::node(const std::string& host, int port) {
  std::string name = node_address(host, port);
  std::lock_guard lock(nodes_mutex_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    ConnectionOptions o = options_.node;
    o.host = host;
    o.port = port;
    it = nodes_.emplace(std::move(name), std::make_unique<Node>(std::move(o))).first;
  }
  return *it->second;
}

Result<Cluster::SlotMap> Cluster::read_slots(Node& from, Deadline deadline) {
  static constexpr std::array<std::string_view, 2> kSlotsCommand{"CLUSTER", "SLOTS"};
  Result<Answer> answer = from.execute(Call{.argv = kSlotsCommand}, deadline);
  if (!answer) return std::move(answer).failure();
  const redisReply& r = *answer->reply;
  if (r.type == REDIS_REPLY_ERROR) {
    return unavailable(fmt::format("redis {}: CLUSTER SLOTS: {}", from.where(), text(r)));
  }
  std::optional<std::vector<SlotRange>> ranges = parse_cluster_slots(r, from.options().host);
  if (!ranges) {
    return unavailable(fmt::format("redis {}: CLUSTER SLOTS: unexpected reply", from.where()));
  }
  SlotMap map;
  map.owners.assign(kSlots, nullptr);
  for (const SlotRange& range : *ranges) {
    Node* owner = &node(range.host, range.port);
    std::fill(map.owners.begin() + range.first, map.owners.begin() + range.last + 1, owner);
    if (std::find(map.primaries.begin(), map.primaries.end(), owner) == map.primaries.end()) {
      map.primaries.push_back(owner);
    }
  }
  map.served = static_cast<std::size_t>(
      std::count_if(map.owners.begin(), map.owners.end(), [](Node* n) { return n != nullptr; }));
  return map;
}

void Cluster::install(SlotMap map) {
  for (std::size_t slot = 0; slot < kSlots; ++slot) {
    slots_[slot].store(map.owners[slot], std::memory_order_release);
  }
  {
    std::lock_guard lock(nodes_mutex_);
    primaries_ = std::move(map.primaries);
  }
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

bool Cluster::is_primary(const Node* n) const {
  std::lock_guard lock(nodes_mutex_);
  return std::find(primaries_.begin(), primaries_.end(), n) != primaries_.end();
}

Status Cluster::refresh(std::uint64_t seen, Deadline deadline, const Node* failed) {
  std::unique_lock lock(refresh_mutex_, deadline);
  if (!lock.owns_lock()) {
    return unavailable("redis cluster: the slot map is being re-read; the call ran out of time");
  }
  if (generation_.load(std::memory_order_acquire) != seen) return {};  // another call did it
  std::vector<Node*> candidates;
  {
    std::lock_guard nodes_lock(nodes_mutex_);
    candidates = primaries_;
    for (Node* seed : seeds_) candidates.push_back(seed);
    for (const auto& [name, n] : nodes_) candidates.push_back(n.get());
  }
  // Each node once, in that order, the one that just failed last.
  std::vector<Node*> order;
  for (Node* n : candidates) {
    if (n != failed && std::find(order.begin(), order.end(), n) == order.end()) order.push_back(n);
  }
  if (failed != nullptr) order.push_back(const_cast<Node*>(failed));
  // The first map that serves every slot wins. A node that has not caught up with the cluster
  // (one restarted from its config file, say) can answer with an old map that leaves slots
  // unserved: such a map is used only when no node has a complete one.
  Failure last = unavailable("redis cluster: no node to read the slot map from");
  std::optional<SlotMap> partial;
  for (Node* n : order) {
    if (Clock::now() >= deadline) break;
    Result<SlotMap> read = read_slots(*n, deadline);
    if (!read) {
      last = std::move(read).failure();
      continue;
    }
    if (read->served == kSlots) {
      install(std::move(read).value());
      return {};
    }
    if (!partial || read->served > partial->served) partial = std::move(read).value();
  }
  if (!partial) return Status(std::move(last));
  install(std::move(*partial));
  return {};
}

Result<Answer> Cluster::execute(std::string_view key, Call call) {
  const Deadline deadline =
      Clock::now() + options_.node.connect_timeout + options_.node.command_timeout;
  const std::uint16_t slot = key_slot(key);
  Node* target = nullptr;
  std::optional<Failure> last;
  bool in_doubt = false;  // a try went out and its reply was lost: the server may have run it
  bool asking = false;
  int attempt = 0;
  for (; attempt < options_.max_attempts && Clock::now() < deadline; ++attempt) {
    const std::uint64_t seen = generation_.load(std::memory_order_acquire);
    if (target == nullptr) target = slots_[slot].load(std::memory_order_acquire);
    if (target == nullptr) {
      Status refreshed = refresh(seen, deadline);
      target = slots_[slot].load(std::memory_order_acquire);
      if (target == nullptr) {
        last = refreshed.ok()
                   ? unavailable(fmt::format("redis cluster: no node serves slot {}", slot))
                   : refreshed.failure();
        if (!pause_before_retry(attempt, deadline)) break;
        continue;
      }
    }
    call.asking = std::exchange(asking, false);
    Result<Answer> answer = target->execute(call, deadline);
    if (!answer) {
      // Down, unreachable or too slow: after a failover another node serves the slot.
      in_doubt = in_doubt || answer.error() == errc::outcome_unknown;
      last = std::move(answer).failure();
      Node* failed = std::exchange(target, nullptr);
      (void)refresh(seen, deadline, failed);
      if (slots_[slot].load(std::memory_order_acquire) == failed &&
          !pause_before_retry(attempt, deadline)) {
        break;
      }
      continue;
    }
    const redisReply& reply = *answer->reply;
    if (reply.type != REDIS_REPLY_ERROR) return answer;
    if (std::optional<Redirect> to = parse_redirect(reply)) {
      last = unavailable(fmt::format("redis {}: {}", answer->where, text(reply)));
      target = &node(to->host, to->port);
      (to->ask ? asked_ : moved_).fetch_add(1, std::memory_order_relaxed);
      if (to->ask) {
        asking = true;  // this call only; the slot is still the source node's
        continue;
      }
      slots_[to->slot].store(target, std::memory_order_release);
      // A node the map does not know as a primary (a promoted replica, a new node) likely took
      // many slots at once: re-read the whole map rather than learn them one MOVED at a time.
      if (!is_primary(target)) (void)refresh(seen, deadline);
      continue;
    }
    if (is_error(reply, "TRYAGAIN") || is_error(reply, "CLUSTERDOWN")) {
      last = unavailable(fmt::format("redis {}: {}", answer->where, text(reply)));
      if (is_error(reply, "CLUSTERDOWN")) {
        // Either the cluster is down, or this node has not caught up with it (a primary
        // restarted from its config file claims its old slots and refuses every command until it
        // hears from the others): read the map from the other nodes first.
        (void)refresh(seen, deadline, std::exchange(target, nullptr));
      }
      if (!pause_before_retry(attempt, deadline)) break;
      continue;
    }
    return answer;  // any other error reply is the caller's to read
  }
  Failure gave_up = unavailable(
      fmt::format("redis cluster: slot {}: gave up after {} tries in {} ms: {}", slot, attempt,
                  (options_.node.connect_timeout + options_.node.command_timeout).count(),
                  last ? last->describe() : std::string("out of time")));
  // A try that went out may have run, whatever the later ones met.
  if (!in_doubt) return gave_up;
  if (last && last->code == errc::outcome_unknown) {
    gave_up.code = last->code;  // its message says so already
    return gave_up;
  }
  return reply_lost(std::move(gave_up));
}

Status Cluster::ping() {
  const Deadline deadline =
      Clock::now() + options_.node.connect_timeout + options_.node.command_timeout;
  if (generation_.load(std::memory_order_acquire) == 0) {
    Status loaded = refresh(0, deadline);
    if (!loaded) return loaded;
  }
  std::vector<Node*> primaries;
  {
    std::lock_guard lock(nodes_mutex_);
    primaries = primaries_;
  }
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
  std::lock_guard lock(nodes_mutex_);
  std::size_t open = 0;
  for (const auto& [name, n] : nodes_) open += n->open_connections();
  return open;
}

std::uint64_t Cluster::dropped() const {
  std::lock_guard lock(nodes_mutex_);
  std::uint64_t dropped = 0;
  for (const auto& [name, n] : nodes_) dropped += n->dropped();
  return dropped;
}

void Cluster::add_stats(PoolStats& pool, RedisStats& redis) const {
  {
    std::lock_guard lock(nodes_mutex_);
    for (const auto& [name, n] : nodes_) n->add_stats(pool, redis);
  }
  redis.moved += moved_.load(std::memory_order_relaxed);
  redis.asked += asked_.load(std::memory_order_relaxed);
  redis.slot_map_reads += generation_.load(std::memory_order_relaxed);
}

}  // namespace idem::redis
