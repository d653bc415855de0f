#pragma once
// What the Redis Cluster tests share: the cluster from IDEM_TEST_REDIS_CLUSTER_SEEDS
// (scripts/lib/cluster.sh starts one), clients on single nodes for checks behind the router's
// back, and the cluster's shape from CLUSTER NODES.
//
// IDEM_TEST_REDIS_CLUSTER_SEEDS unset: the test skips with a message (scripts/test always sets
// it). Set but unreachable: the test fails.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "idem/redis/client.hpp"

namespace idem::testing {

inline const char* cluster_seeds() {
  const char* seeds = std::getenv("IDEM_TEST_REDIS_CLUSTER_SEEDS");
  return seeds != nullptr && *seeds != '\0' ? seeds : nullptr;
}

/// IDEM_TEST_REDIS_CLUSTER_URI (a TLS cluster's: rediss+cluster://...), else
/// redis+cluster://<IDEM_TEST_REDIS_CLUSTER_SEEDS>.
inline std::string cluster_uri() {
  const char* uri = std::getenv("IDEM_TEST_REDIS_CLUSTER_URI");
  if (uri != nullptr && *uri != '\0') return uri;
  return std::string("redis+cluster://") + cluster_seeds();
}

/// What a test adds to a redis-cli command line to reach the test cluster's nodes: their TLS
/// options (IDEM_TEST_REDIS_CLI_TLS, after a space) in a TLS cluster, else nothing.
inline std::string redis_cli_tls() {
  const char* args = std::getenv("IDEM_TEST_REDIS_CLI_TLS");
  return args != nullptr && *args != '\0' ? std::string(" ") + args : std::string{};
}

/// Cluster options for the test cluster: every node of it as a seed.
inline redis::ClusterOptions cluster_options() {
  Result<redis::ClusterOptions> parsed = redis::ClusterOptions::from_uri(cluster_uri());
  EXPECT_TRUE(parsed.has_value()) << (parsed ? "" : parsed.failure().describe());
  redis::ClusterOptions o = parsed ? parsed.value() : redis::ClusterOptions{};
  o.node.connect_timeout = std::chrono::milliseconds{500};
  o.node.command_timeout = std::chrono::milliseconds{1500};
  o.node.pool_size = 16;
  o.node.pool_wait = std::chrono::milliseconds{2000};
  return o;
}

/// A cluster client that answered PING on every primary, or null after a failure.
inline std::shared_ptr<redis::Client> connect_cluster(redis::ClusterOptions options) {
  auto client = std::make_shared<redis::Client>(std::move(options));
  Status up = client->ping();
  EXPECT_TRUE(up.ok()) << "IDEM_TEST_REDIS_CLUSTER_SEEDS=" << cluster_seeds()
                       << " is set but the cluster does not answer: " << up.failure().describe();
  return up.ok() ? client : nullptr;
}

/// Skips the test when IDEM_TEST_REDIS_CLUSTER_SEEDS is unset; fails it when unreachable.
#define IDEM_REQUIRE_REDIS_CLUSTER(client_var)                                            \
  if (::idem::testing::cluster_seeds() == nullptr) {                                      \
    GTEST_SKIP() << "IDEM_TEST_REDIS_CLUSTER_SEEDS is not set; scripts/test starts a "    \
                    "cluster (scripts/lib/cluster.sh) and sets it";                       \
  }                                                                                       \
  auto client_var = ::idem::testing::connect_cluster(::idem::testing::cluster_options()); \
  ASSERT_NE(client_var, nullptr)

/// A plain client on one node ("host:port"): no routing, no redirections.
inline std::shared_ptr<redis::Client> node_client(std::string_view address) {
  Result<redis::ConnectionOptions> o =
      redis::ConnectionOptions::from_uri("redis://" + std::string(address));
  EXPECT_TRUE(o.has_value()) << address;
  redis::ConnectionOptions options = o ? o.value() : redis::ConnectionOptions{};
  options.tls = cluster_options().node.tls;  // a TLS cluster's nodes speak TLS only
  options.connect_timeout = std::chrono::milliseconds{500};
  options.command_timeout = std::chrono::milliseconds{5000};
  options.pool_size = 1;  // one connection: ASKING and the command after it share it
  return std::make_shared<redis::Client>(std::move(options));
}

/// The seeds, one address each.
inline std::vector<std::string> seed_addresses() {
  std::vector<std::string> out;
  std::stringstream in(cluster_seeds());
  for (std::string seed; std::getline(in, seed, ',');) out.push_back(seed);
  return out;
}

/// One line of CLUSTER NODES.
struct ClusterNode {
  std::string id;
  std::string address;  // host:port
  bool primary = false;
  bool failed = false;     // flagged fail or fail?
  bool myself = false;     // the node that answered
  std::string primary_id;  // a replica's primary
  std::vector<std::pair<int, int>> slots;
};

/// The lines of a CLUSTER NODES reply.
inline std::vector<ClusterNode> parse_cluster_nodes(const std::string& text) {
  std::vector<ClusterNode> nodes;
  std::stringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::stringstream fields(line);
    ClusterNode n;
    std::string address, flags, ignore;
    fields >> n.id >> address >> flags >> n.primary_id;
    n.address = address.substr(0, address.find('@'));
    n.primary = flags.find("master") != std::string::npos;
    n.failed = flags.find("fail") != std::string::npos;
    n.myself = flags.find("myself") != std::string::npos;
    if (n.primary_id == "-") n.primary_id.clear();
    for (int i = 0; i < 4; ++i) fields >> ignore;  // ping, pong, epoch, link
    for (std::string range; fields >> range;) {
      if (range.front() == '[') continue;  // a slot being migrated
      const auto dash = range.find('-');
      const int first = std::stoi(range.substr(0, dash));
      const int last = dash == std::string::npos ? first : std::stoi(range.substr(dash + 1));
      n.slots.emplace_back(first, last);
    }
    nodes.push_back(std::move(n));
  }
  return nodes;
}

/// CLUSTER NODES as one node ("host:port") sees it; empty when it does not answer.
inline std::vector<ClusterNode> cluster_nodes_seen_by(const std::string& address) {
  Result<redis::Reply> r = node_client(address)->command({"CLUSTER", "NODES"});
  if (!r || r->type != redis::Reply::Type::string) return {};
  return parse_cluster_nodes(r->str);
}

/// CLUSTER NODES as seen by the first seed that answers.
inline std::vector<ClusterNode> cluster_nodes() {
  for (const std::string& seed : seed_addresses()) {
    std::vector<ClusterNode> nodes = cluster_nodes_seen_by(seed);
    if (!nodes.empty()) return nodes;
  }
  ADD_FAILURE() << "no seed of " << cluster_seeds() << " answers CLUSTER NODES";
  return {};
}

/// The value of `name` in an INFO or CLUSTER INFO reply ("name:value" lines), if it has one.
inline std::optional<std::string> info_field(const std::string& text, std::string_view name) {
  const auto at = text.find(std::string(name) + ":");
  if (at == std::string::npos) return std::nullopt;
  const auto begin = at + name.size() + 1;
  return text.substr(begin, text.find_first_of("\r\n", begin) - begin);
}

/// What every node says of itself: its CLUSTER NODES line, cluster_state, and its replication
/// role and link. For a failure message: a cluster that did not settle names the node that
/// did not, rather than leaving it to guesswork.
inline std::string cluster_report() {
  std::vector<std::string> addresses = seed_addresses();
  for (const ClusterNode& n : cluster_nodes()) {
    if (std::find(addresses.begin(), addresses.end(), n.address) == addresses.end()) {
      addresses.push_back(n.address);
    }
  }
  auto field = [](const std::string& text, std::string_view name) {
    std::optional<std::string> value = info_field(text, name);
    return value ? *value : std::string("?");
  };
  std::string out;
  for (const std::string& address : addresses) {
    auto c = node_client(address);
    Result<redis::Reply> nodes = c->command({"CLUSTER", "NODES"});
    if (!nodes) {
      out += address + ": " + nodes.failure().describe() + "\n";
      continue;
    }
    std::string self = "(no myself line)";
    std::stringstream lines(nodes->str);
    for (std::string line; std::getline(lines, line);) {
      if (line.find("myself") != std::string::npos) self = line;
    }
    Result<redis::Reply> info = c->command({"CLUSTER", "INFO"});
    Result<redis::Reply> repl = c->command({"INFO", "replication"});
    out += address + ": " + self +
           "\n    cluster_state:" + (info ? field(info->str, "cluster_state") : "?") +
           " role:" + (repl ? field(repl->str, "role") : "?") +
           " master_link_status:" + (repl ? field(repl->str, "master_link_status") : "-") +
           " connected_slaves:" + (repl ? field(repl->str, "connected_slaves") : "?") + "\n";
  }
  return out;
}

/// The node that serves `slot`, as CLUSTER NODES says.
inline ClusterNode owner_of(int slot) {
  for (ClusterNode& n : cluster_nodes()) {
    if (!n.primary || n.failed) continue;
    for (auto [first, last] : n.slots) {
      if (first <= slot && slot <= last) return n;
    }
  }
  ADD_FAILURE() << "no primary serves slot " << slot;
  return {};
}

/// Waits (up to `limit`) until every live node answers cluster_state:ok and every primary that
/// serves slots has a connected replica when `with_replicas`.
inline bool wait_cluster_ok(std::chrono::seconds limit, bool with_replicas) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    bool ok = true;
    std::vector<ClusterNode> nodes = cluster_nodes();
    for (const ClusterNode& n : nodes) {
      if (n.failed) continue;
      auto c = node_client(n.address);
      Result<redis::Reply> info = c->command({"CLUSTER", "INFO"});
      if (!info || info->str.find("cluster_state:ok") == std::string::npos) ok = false;
      if (with_replicas && n.primary && !n.slots.empty()) {
        Result<redis::Reply> repl = c->command({"INFO", "replication"});
        if (!repl || repl->str.find("state=online") == std::string::npos) ok = false;
      }
    }
    if (ok && !nodes.empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds{100});
  }
  return false;
}

}  // namespace idem::testing
