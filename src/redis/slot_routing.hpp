#pragma once
// Redis Cluster routing without I/O, shared by the blocking face (cluster.hpp: a thread waits
// for each try) and the Asio face (async_store.cpp: each try is an event on a strand). Both
// keep their nodes and slot map in a Topology, read CLUSTER SLOTS into it with a SlotMapRead,
// and let Tries decide what a reply or a failure means for the call: answer it, resend it
// (where, after ASKING or not), read the map again, pause how long, or give up with which
// failure, within its attempts and its time. The faces only send, wait and sleep. Internal to
// idem_redis.

#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "acl_refusal.hpp"
#include "connection_policy.hpp"
#include "idem/redis/client.hpp"
#include "idem/result.hpp"
#include "protocol.hpp"

namespace idem::redis {

inline constexpr std::size_t kSlots = 16384;
/// The command that reads the slot map.
inline constexpr std::array<std::string_view, 2> kClusterSlots{"CLUSTER", "SLOTS"};

/// A redirection reply: `MOVED <slot> <host>:<port>` or `ASK <slot> <host>:<port>`.
struct Redirect {
  bool ask = false;
  std::uint16_t slot = 0;
  std::string host;
  int port = 0;
};
/// Parses a MOVED or ASK error reply; nullopt for any other reply.
std::optional<Redirect> parse_redirect(const redisReply& reply);

/// One range of a CLUSTER SLOTS reply: slots first..last served by the primary at host:port.
struct SlotRange {
  std::uint16_t first = 0;
  std::uint16_t last = 0;
  std::string host;
  int port = 0;
};
/// Parses a CLUSTER SLOTS reply read from the node at `from_host` (an empty or unknown "?"
/// endpoint means that address); nullopt when the reply is not one.
std::optional<std::vector<SlotRange>> parse_cluster_slots(const redisReply& reply,
                                                          std::string_view from_host);

/// A node's name in maps and messages: "host:port", "[host]:port" for IPv6.
std::string node_address(std::string_view host, int port);

/// How a face names its cluster options in messages.
struct OptionNames {
  std::string_view owner;  // "redis::Client"
  std::string_view node;   // "ClusterOptions::node"
  std::string_view seeds;  // "ClusterOptions::seeds"
};

/// The seeds' addresses, once the options are checked: a cluster has database 0 only, speaks
/// TCP only and needs host:port seeds. Throws std::invalid_argument naming the option
/// otherwise: a programming error, refused at construction rather than answered as an outage
/// on every call.
std::vector<ConnectionOptions> cluster_seeds(const ConnectionOptions& node,
                                             std::span<const std::string> seeds,
                                             const OptionNames& names);

/// One call's tries across the nodes of a cluster: where the next goes, whether time and
/// attempts are left for it, why the last did not answer, and whether one went out unanswered
/// (then giving up is errc::outcome_unknown).
template <class N>
struct Tries {
  /// What a reply asks of the call: to take it as its answer (any error reply but the routing
  /// ones included), or to send again (to `redirect`, else the slot's owner), after reading the
  /// slot map and after a pause if it says so.
  struct Next {
    bool answer = false;
    bool read_map = false;  // MOVED to a node the map does not know as a primary; CLUSTERDOWN
    bool ask_last = false;  // ... asking the node that answered last (CLUSTERDOWN)
    bool pause = false;     // pause() first: TRYAGAIN, CLUSTERDOWN
  };

  std::uint16_t slot = 0;
  int attempts = 0;  // sends so far (the faces count them)
  std::chrono::milliseconds budget{};
  Deadline deadline{};     // no send after
  std::uint64_t seen = 0;  // the slot map generation the last send routed with
  N* redirect = nullptr;   // MOVED or ASK: the next send goes there
  bool asking = false;     // ... after ASKING (ASK)
  bool in_doubt = false;   // a try went out and its reply was lost: the server may have run it
  bool last_in_doubt = false;
  std::string last;  // why the last try did not answer

  /// A call on `key`'s slot, with call_budget(`options`) from now.
  void start(std::string_view key, const ConnectionOptions& options) {
    slot = key_slot(key);
    budget = call_budget(options);
    deadline = std::chrono::steady_clock::now() + budget;
  }
  /// Whether another send may go: fewer than `max_attempts` so far, and before the deadline.
  bool may_send(int max_attempts) const {
    return attempts < max_attempts && std::chrono::steady_clock::now() < deadline;
  }
  /// The pause before the next send after TRYAGAIN, CLUSTERDOWN or a failed node (1 ms, doubling
  /// with the attempts, at most 100 ms); nullopt when it would end past the deadline.
  std::optional<std::chrono::milliseconds> pause() const {
    const auto p = std::min(std::chrono::milliseconds{1 << std::clamp(attempts, 0, 7)},
                            std::chrono::milliseconds{100});
    if (std::chrono::steady_clock::now() + p >= deadline) return std::nullopt;
    return p;
  }

  /// The target of the next send: the redirection's node, else the slot's owner (null: no map
  /// names one yet). `asking` is whether ASKING must precede it.
  template <class Topo>
  N* next(const Topo& topology, bool& asking_now) {
    asking_now = redirect != nullptr && std::exchange(asking, false);
    N* to = std::exchange(redirect, nullptr);
    return to != nullptr ? to : topology.owner(slot);
  }

  /// No map names the slot's owner, even after a read.
  void no_owner() {
    last = fmt::format("no node serves slot {}", slot);
    last_in_doubt = false;
  }
  /// A try failed without a reply (refused, timed out, closed).
  void failed(const Failure& failure) {
    last_in_doubt = failure.code == errc::outcome_unknown;
    in_doubt = in_doubt || last_in_doubt;
    last = failure.describe();
  }

  /// What `reply`, from the node `from` named `where`, asks of the call; the redirections update
  /// `topology` (a MOVED slot's owner) and its counters.
  template <class Topo>
  Next on_reply(Topo& topology, const redisReply& reply, std::string_view where) {
    if (reply.type != REDIS_REPLY_ERROR) return {.answer = true};
    const auto refused = [&] {
      last = fmt::format("redis {}: {}", where, text(reply));
      last_in_doubt = false;
    };
    if (std::optional<Redirect> to = parse_redirect(reply)) {
      refused();
      redirect = &topology.node(to->host, to->port);
      asking = to->ask;
      topology.count_redirect(to->ask);
      if (to->ask) return {};  // this call only; the slot is still the source's
      topology.learn(to->slot, redirect);
      // A node the map does not know as a primary (a promoted replica, a new node) likely took
      // many slots at once: read the whole map rather than learn them one MOVED at a time.
      return {.read_map = !topology.is_primary(redirect)};
    }
    if (is_error(reply, "TRYAGAIN")) {
      refused();
      return {.pause = true};
    }
    if (is_error(reply, "CLUSTERDOWN")) {
      // Either the cluster is down, or this node has not caught up with it (a primary restarted
      // from its config file claims its old slots and refuses every command until it hears
      // from the others): read the map from the other nodes first.
      refused();
      return {.read_map = true, .ask_last = true, .pause = true};
    }
    return {.answer = true};
  }

  /// The failure of a call that gives up.
  Failure give_up() const {
    Failure out = unavailable(
        fmt::format("redis cluster: slot {}: gave up after {} tries in {} ms: {}", slot, attempts,
                    budget.count(), last.empty() ? std::string_view("out of time") : last));
    // A try that went out may have run, whatever the later ones met.
    if (!in_doubt) return out;
    if (last_in_doubt) {
      out.code = make_error_code(errc::outcome_unknown);  // its message says so already
      return out;
    }
    return reply_lost(std::move(out));
  }
};

/// A cluster's nodes (each a face's server: the blocking Node, the Asio Link), created on first
/// use and kept as long as the topology, and the slot map calls route by. Thread-safe.
template <class N>
class Topology {
 public:
  using Make = std::function<std::unique_ptr<N>(ConnectionOptions)>;

  /// The seeds' nodes are made at once (cluster_seeds checks the options).
  Topology(const ConnectionOptions& node, std::span<const std::string> seeds,
           const OptionNames& names, Make make)
      : node_options_(node), make_(std::move(make)) {
    for (const ConnectionOptions& seed : cluster_seeds(node, seeds, names)) {
      seeds_.push_back(&this->node(seed.host, seed.port));
    }
  }

  /// The node at host:port.
  N& node(const std::string& host, int port) {
    std::string name = node_address(host, port);
    std::lock_guard lock(mutex_);
    auto it = nodes_.find(name);
    if (it == nodes_.end()) {
      ConnectionOptions o = node_options_;
      o.host = host;
      o.port = port;
      it = nodes_.emplace(std::move(name), make_(std::move(o))).first;
    }
    return *it->second;
  }

  /// The slot's primary in the map; null when none is known (yet).
  N* owner(std::uint16_t slot) const noexcept {
    return slots_[slot].load(std::memory_order_acquire);
  }
  /// Maps installed so far: a call that routed with one generation knows whether another call
  /// read the map since.
  std::uint64_t generation() const noexcept { return generation_.load(std::memory_order_acquire); }
  /// A MOVED: the slot is `n`'s now.
  void learn(std::uint16_t slot, N* n) noexcept {
    slots_[slot].store(n, std::memory_order_release);
  }
  void count_redirect(bool ask) noexcept {
    (ask ? asked_ : moved_).fetch_add(1, std::memory_order_relaxed);
  }

  bool is_primary(const N* n) const {
    std::lock_guard lock(mutex_);
    return std::find(primaries_.begin(), primaries_.end(), n) != primaries_.end();
  }
  std::vector<N*> primaries() const {
    std::lock_guard lock(mutex_);
    return primaries_;
  }

  /// The nodes a refresh asks in turn, each once: the last map's primaries, the seeds, every
  /// node met since; `failed` last.
  std::vector<N*> refresh_order(const N* failed) const {
    std::vector<N*> order;
    const auto add = [&](N* n) {
      if (n != failed && std::find(order.begin(), order.end(), n) == order.end())
        order.push_back(n);
    };
    std::lock_guard lock(mutex_);
    for (N* n : primaries_) add(n);
    for (N* n : seeds_) add(n);
    for (const auto& [name, n] : nodes_) add(n.get());
    if (failed != nullptr) order.push_back(const_cast<N*>(failed));
    return order;
  }

  /// One node's CLUSTER SLOTS, by node.
  struct SlotMap {
    std::vector<N*> owners;     // by slot; null: served by nobody in this map
    std::vector<N*> primaries;  // in the order the reply names them
    std::size_t served = 0;     // slots with an owner
  };

  /// Makes `map` the one calls route by.
  void install(SlotMap map) {
    for (std::size_t slot = 0; slot < kSlots; ++slot) {
      slots_[slot].store(map.owners[slot], std::memory_order_release);
    }
    {
      std::lock_guard lock(mutex_);
      primaries_ = std::move(map.primaries);
    }
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }

  /// Calls `f` on every node, outside the lock: `f` may route (closing a node fails its calls).
  template <class F>
  void for_each_node(F&& f) const {
    std::vector<N*> nodes;
    {
      std::lock_guard lock(mutex_);
      for (const auto& [name, n] : nodes_) nodes.push_back(n.get());
    }
    for (N* n : nodes) f(*n);
  }

  std::uint64_t moved() const noexcept { return moved_.load(std::memory_order_relaxed); }
  std::uint64_t asked() const noexcept { return asked_.load(std::memory_order_relaxed); }

 private:
  ConnectionOptions node_options_;
  Make make_;
  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<N>> nodes_;  // by "host:port"
  std::vector<N*> seeds_;
  std::vector<N*> primaries_;  // of the last map read; under mutex_

  std::array<std::atomic<N*>, kSlots> slots_{};     // null: not known (yet)
  std::atomic<std::uint64_t> generation_{0};        // maps installed so far
  std::atomic<std::uint64_t> moved_{0}, asked_{0};  // redirections followed (stats)
};

/// One read of the slot map, which both faces drive (the blocking one in a loop, the Asio one
/// an event per node): the known nodes are asked in turn, `failed` last, and the first map that
/// serves every slot wins. A node that has not caught up with the cluster (one restarted from
/// its config file, say) can answer with an old map that leaves slots unserved: the best such
/// map is used only when no node has a complete one.
template <class N>
class SlotMapRead {
 public:
  SlotMapRead(Topology<N>& topology, const N* failed)
      : topology_(&topology), order_(topology.refresh_order(failed)) {}

  /// The node to ask next; null when the read is over (a complete map, or every node asked).
  N* next() noexcept { return done_ || next_ == order_.size() ? nullptr : order_[next_++]; }
  /// The node at `host` (named `where`) answered `reply`.
  void answered(const redisReply& reply, std::string_view host, std::string_view where) {
    const std::optional<std::vector<SlotRange>> ranges =
        reply.type == REDIS_REPLY_ERROR ? std::nullopt : parse_cluster_slots(reply, host);
    if (!ranges) {
      why_ = fmt::format("redis {}: CLUSTER SLOTS: {}", where,
                         reply.type == REDIS_REPLY_ERROR ? text(reply) : "unexpected reply");
      if (reply.type == REDIS_REPLY_ERROR && acl_refusal(text(reply))) {
        refused_ = error_reply_failure(reply, "reading the slot map", where);
      }
      return;
    }
    typename Topology<N>::SlotMap map;
    map.owners.assign(kSlots, nullptr);
    for (const SlotRange& range : *ranges) {
      N* owner = &topology_->node(range.host, range.port);
      std::fill(map.owners.begin() + range.first, map.owners.begin() + range.last + 1, owner);
      if (std::find(map.primaries.begin(), map.primaries.end(), owner) == map.primaries.end()) {
        map.primaries.push_back(owner);
      }
    }
    map.served = kSlots - static_cast<std::size_t>(
                              std::count(map.owners.begin(), map.owners.end(), nullptr));
    done_ = map.served == kSlots;
    if (!best_ || map.served > best_->served) best_ = std::move(map);
  }
  /// The node asked gave no reply.
  void failed(const Failure& failure) { why_ = failure.describe(); }
  /// Installs the best map read; false when none was (why() says why).
  bool install() {
    if (!best_) return false;
    topology_->install(std::move(*best_));
    best_.reset();
    return true;
  }
  const std::string& why() const noexcept { return why_; }
  /// The failure of a read that installed nothing: config_invalid when a node refused the user
  /// CLUSTER SLOTS (no retry gets past that), else store_unavailable saying why().
  Failure failure() const { return refused_ ? *refused_ : unavailable(why_); }

 private:
  Topology<N>* topology_;
  std::vector<N*> order_;
  std::size_t next_ = 0;
  bool done_ = false;
  std::optional<typename Topology<N>::SlotMap> best_;
  std::string why_ = "redis cluster: no node to read the slot map from";
  std::optional<Failure> refused_;  // a node's ACL refusal
};

}  // namespace idem::redis
