// A node that holds an old view of the cluster: a primary restarted from its config file before
// it has heard from the others still claims its slots, answers CLUSTERDOWN to every command and
// CLUSTER SLOTS with its old map. A client that has such a node among its seeds must read the
// map from another node and serve every key.
//
// The stale node here is a separate redis-server whose nodes.conf claims a live primary's slots
// and lists the other primaries as failed, at a cluster bus port nobody listens on: it cannot
// reach the cluster and the cluster never learns of it, so it stays stale for the whole test.

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "idem/engine/effective_key.hpp"
#include "idem/guard.hpp"
#include "idem/redis/store.hpp"
#include "redis/cluster_fixture.hpp"
#include "redis/redis_cluster_support.hpp"
#include "redis/redis_test_support.hpp"
#include "support/free_port.hpp"

namespace idem::testing {
namespace {

using namespace std::chrono_literals;
using redis::key_slot;
namespace fs = std::filesystem;

std::string fake_id(char c) { return std::string(40, c); }

// The slot ranges of a nodes.conf line (" 0-5460 6000"), each after a space.
std::string ranges(const std::vector<std::pair<int, int>>& slots) {
  std::string out;
  for (auto [first, last] : slots) {
    out += ' ' + std::to_string(first) + (first == last ? "" : '-' + std::to_string(last));
  }
  return out;
}

// A cluster-enabled redis-server started from a nodes.conf the test writes; shut down and its
// folder removed on destruction.
class StaleNode {
 public:
  // `mine`: the slots it claims as its own. `others`: primaries it believes in (listed as
  // failed, their bus at a closed port), so that its CLUSTER SLOTS names them.
  StaleNode(const std::vector<std::pair<int, int>>& mine, const std::vector<ClusterNode>& others) {
    char tmpl[] = "/tmp/idem-stale-node.XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return;
    dir_ = tmpl;
    port_ = free_port();
    const int bus = free_port();
    const int closed = free_port();
    std::ofstream nodes(dir_ / "nodes.conf");
    nodes << fake_id('a') << " 127.0.0.1:" << port_ << '@' << bus
          << " myself,master - 0 0 1 connected" << ranges(mine) << '\n';
    char id = 'b';
    for (const ClusterNode& n : others) {
      nodes << fake_id(id++) << ' ' << n.address << '@' << closed
            << " master,fail - 0 0 1 connected" << ranges(n.slots) << '\n';
    }
    nodes << "vars currentEpoch 1 lastVoteEpoch 0\n";
    nodes.close();
    std::ofstream conf(dir_ / "redis.conf");
    // In a TLS cluster (scripts/tls) the stale node speaks TLS too, with the test authority's
    // server certificate, as the clients expect of every node.
    const char* tls_dir = std::getenv("IDEM_TEST_TLS_DIR");
    if (cluster_options().node.tls.enabled && tls_dir != nullptr) {
      const fs::path certs(tls_dir);
      conf << "tls-port " << port_ << "\nport 0\ntls-cluster yes\ntls-cert-file \""
           << (certs / "server.crt").string() << "\"\ntls-key-file \""
           << (certs / "server.key").string() << "\"\ntls-ca-cert-file \""
           << (certs / "ca.crt").string() << "\"\ntls-auth-clients no\n";
    } else {
      conf << "port " << port_ << "\n";
    }
    conf << "cluster-port " << bus << "\nbind 127.0.0.1\ndir \"" << dir_.string()
         << "\"\nsave \"\"\nappendonly no\ndaemonize yes\nlogfile \""
         << (dir_ / "redis.log").string() << "\"\ncluster-enabled yes\ncluster-config-file \""
         << (dir_ / "nodes.conf").string() << "\"\ncluster-node-timeout 1000\n";
    conf.close();
    const std::string start = "redis-server '" + (dir_ / "redis.conf").string() + "'";
    if (std::system(start.c_str()) != 0) return;
    for (int i = 0; i < 100 && !up_; ++i) {
      up_ = node_client(address())->ping().ok();
      if (!up_) std::this_thread::sleep_for(50ms);
    }
  }
  ~StaleNode() {
    if (up_) (void)node_client(address())->command({"SHUTDOWN", "NOSAVE"});
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }
  StaleNode(const StaleNode&) = delete;
  StaleNode& operator=(const StaleNode&) = delete;

  bool up() const { return up_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  fs::path dir_;
  int port_ = 0;
  bool up_ = false;
};

class RedisClusterStaleViewTest : public ClusterFixture {
 protected:
  void SetUp() override {
    set_up_cluster(/*with_replicas=*/false, "stale");
    if (!ready()) return;
    for (const ClusterNode& n : cluster_nodes()) {
      if (n.primary && !n.failed && !n.slots.empty()) primaries_.push_back(n);
    }
    ASSERT_GE(primaries_.size(), 2u);
    // By their lowest slot: the stale node takes the first primary's slots, so that its
    // CLUSTER SLOTS (in slot order) names it first.
    std::sort(primaries_.begin(), primaries_.end(), [](const auto& a, const auto& b) {
      return *std::min_element(a.slots.begin(), a.slots.end()) <
             *std::min_element(b.slots.begin(), b.slots.end());
    });
  }

  // Cluster options whose first seed is `stale`: the map is read from it first.
  static redis::ClusterOptions stale_first(const StaleNode& stale) {
    redis::ClusterOptions o = cluster_options();
    o.seeds.insert(o.seeds.begin(), stale.address());
    return o;
  }

  // Runs a fresh key and its replay for `count` ids whose records fall in `slots`.
  template <class Guard>
  void expect_served(Guard& guard, RedisStore& store, const std::vector<std::pair<int, int>>& slots,
                     int count) {
    int found = 0;
    for (int i = 0; found < count && i < 1'000'000; ++i) {
      const std::string id = "id-" + std::to_string(i);
      const int slot = key_slot(store.record_key(detail::EffectiveKey("stale", {}, id).view()));
      bool inside = false;
      for (auto [first, last] : slots) inside = inside || (first <= slot && slot <= last);
      if (!inside) continue;
      ++found;
      int runs = 0;
      auto first = guard.execute(id, [&] { return ++runs; });
      ASSERT_TRUE(first) << id << " (slot " << slot << "): " << first.message();
      EXPECT_TRUE(first.recorded()) << id;
      auto again = guard.execute(id, [&] { return ++runs; });
      ASSERT_TRUE(again) << id << ": " << again.message();
      EXPECT_TRUE(again.replayed()) << id;
      EXPECT_EQ(runs, 1) << id;
    }
    EXPECT_EQ(found, count);
  }

  std::vector<ClusterNode> primaries_;
};

TEST_F(RedisClusterStaleViewTest, ANodeAnsweringClusterDownIsNotTheOneAskedForTheMapAgain) {
  // It claims the first primary's slots and names the others: a complete map, wrong in one part.
  const std::vector<ClusterNode> others(primaries_.begin() + 1, primaries_.end());
  StaleNode stale(primaries_[0].slots, others);
  ASSERT_TRUE(stale.up()) << "could not start a redis-server at " << stale.address();
  EXPECT_NE(redis_string(*node_client(stale.address()), {"CLUSTER", "INFO"}).find("state:fail"),
            std::string::npos);

  auto client = connect_cluster(stale_first(stale));
  ASSERT_NE(client, nullptr);
  RedisStore store(client, RedisStoreOptions{.prefix = prefix_});
  IdempotencyGuard guard{store, Options{.scope = "stale"}};
  expect_served(guard, store, primaries_[0].slots, 10);  // the slots it claims wrongly
  expect_served(guard, store, primaries_[1].slots, 5);
}

TEST_F(RedisClusterStaleViewTest, AMapWithUnservedSlotsIsReadAgainFromAnotherNode) {
  // It knows of no other node: its CLUSTER SLOTS leaves every slot but its own unserved.
  StaleNode stale(primaries_[0].slots, {});
  ASSERT_TRUE(stale.up()) << "could not start a redis-server at " << stale.address();

  auto client = connect_cluster(stale_first(stale));
  ASSERT_NE(client, nullptr);
  RedisStore store(client, RedisStoreOptions{.prefix = prefix_});
  IdempotencyGuard guard{store, Options{.scope = "stale"}};
  expect_served(guard, store, primaries_[1].slots, 10);  // slots the stale map leaves out
  expect_served(guard, store, primaries_[0].slots, 5);
}

}  // namespace
}  // namespace idem::testing
