// Redis Cluster under change, with guards running: an ASK redirection during a slot migration, a
// reshard of live keys (redis-cli --cluster reshard), and failovers (CLUSTER FAILOVER on a
// replica, then SIGKILL of a primary). In every case: no handler runs again for a key whose
// commit was confirmed, every store call ends within the client's deadline, and a commit that
// could not be confirmed says so on the Outcome. These tests change the cluster: RUN_SERIAL.

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include "idem/engine/effective_key.hpp"
#include "idem/guard.hpp"
#include "idem/redis/store.hpp"
#include "redis/cluster_fixture.hpp"
#include "redis/redis_cluster_support.hpp"
#include "redis/redis_test_support.hpp"

namespace idem::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using redis::key_slot;

// A store that times every call it forwards: the longest is what a caller could have hung for.
class TimedStore {
 public:
  explicit TimedStore(RedisStore& inner) : inner_(inner) {}
  Result<Claim> claim(const ClaimRequest& r) {
    return timed([&] { return inner_.claim(r); });
  }
  Status commit(const Ticket& t, const Completion& c) {
    return timed([&] { return inner_.commit(t, c); });
  }
  Status abort(const Ticket& t) {
    return timed([&] { return inner_.abort(t); });
  }
  Status extend(const Ticket& t, std::chrono::milliseconds lease) {
    return timed([&] { return inner_.extend(t, lease); });
  }
  Clock::duration longest() const { return Clock::duration(longest_.load()); }

 private:
  template <class F>
  std::invoke_result_t<F&> timed(F&& f) {
    const auto start = Clock::now();
    auto out = f();
    const auto took = (Clock::now() - start).count();
    for (auto seen = longest_.load(); took > seen && !longest_.compare_exchange_weak(seen, took);) {
    }
    return out;
  }
  RedisStore& inner_;
  std::atomic<Clock::duration::rep> longest_{0};
};

// The deadline of one cluster call with cluster_options(), and slack for a loaded machine.
std::chrono::milliseconds call_bound() {
  const redis::ClusterOptions o = cluster_options();
  return o.node.connect_timeout + o.node.command_timeout + 1500ms;
}

std::string record_name(RedisStore& store, std::string_view scope, std::string_view id) {
  return store.record_key(detail::EffectiveKey(scope, {}, id).view());
}

// Ids whose records fall in [first, last] slots, `count` of them.
std::vector<std::string> ids_in_slots(RedisStore& store, std::string_view scope, int first,
                                      int last, std::size_t count) {
  std::vector<std::string> ids;
  for (int i = 0; ids.size() < count && i < 10'000'000; ++i) {
    std::string id = "id-" + std::to_string(i);
    const int slot = key_slot(record_name(store, scope, id));
    if (first <= slot && slot <= last) ids.push_back(std::move(id));
  }
  return ids;
}

std::string node_info(const std::string& address, std::string_view field) {
  auto c = node_client(address);
  Result<redis::Reply> info = c->command({"INFO", "server"});
  if (!info) return {};
  return info_field(info->str, field).value_or("");
}

// Waits until `node`, a primary killed and restarted from its config file, is `heir`'s replica.
// Redis makes a returning primary whose slots have moved the new owner's replica by itself, but
// it can also leave it a primary without slots; after 10 s this does what an operator then does,
// CLUSTER REPLICATE, so that the tests after this one find every primary with its replica.
bool rejoin_as_replica(const ClusterNode& node, const ClusterNode& heir) {
  const auto start = Clock::now();
  bool told = false;
  while (Clock::now() - start < 40s) {
    for (const ClusterNode& n : cluster_nodes_seen_by(node.address)) {
      if (!n.myself) continue;
      if (!n.primary && n.primary_id == heir.id) return true;
      if (!told && n.primary && n.slots.empty() && Clock::now() - start > 10s) {
        told = true;
        std::cerr << node.address << " came back as a primary without slots: CLUSTER REPLICATE "
                  << heir.address << "\n";
        (void)node_client(node.address)->command({"CLUSTER", "REPLICATE", heir.id});
      }
    }
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

long long cmdstat_calls(const std::string& address, std::string_view command) {
  auto c = node_client(address);
  Result<redis::Reply> info = c->command({"INFO", "commandstats"});
  if (!info) return -1;
  const std::string key = "cmdstat_" + std::string(command) + ":calls=";
  const auto at = info->str.find(key);
  return at == std::string::npos ? 0 : std::atoll(info->str.c_str() + at + key.size());
}

// What the workers saw, per key. A key is confirmed once a call that ran its handler got
// recorded() (with Durability, WAIT confirmed the commit).
struct Ledger {
  explicit Ledger(std::size_t keys) : runs(keys), confirmed(keys) {}
  std::vector<std::atomic<int>> runs;
  std::vector<std::atomic<bool>> confirmed;  // an outcome said recorded()
  std::atomic<int> reruns_after_confirmed{0};
  std::atomic<int> unconfirmed{0};  // values whose commit was not confirmed, with the reason
  std::atomic<int> store_failures{0};
  std::atomic<int> calls{0};
  std::mutex mutex;
  std::map<std::size_t, std::string> values;  // the value a confirmed outcome carried
};

// Runs guard calls over `ids` from `threads` threads until `stop`.
template <class Guard>
std::vector<std::thread> start_workers(Guard& guard, const std::vector<std::string>& ids,
                                       Ledger& ledger, std::atomic<bool>& stop, int threads) {
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (std::size_t n = static_cast<std::size_t>(t); !stop.load(); ++n) {
        const std::size_t i = (n * 7) % ids.size();
        auto out = guard.execute(ids[i], [&] {
          if (ledger.confirmed[i].load()) ledger.reruns_after_confirmed.fetch_add(1);
          ledger.runs[i].fetch_add(1);
          std::this_thread::sleep_for(1ms);
          return ids[i] + " by " + std::to_string(t) + "/" + std::to_string(n);
        });
        ledger.calls.fetch_add(1);
        if (!out) {
          if (out.error() == errc::store_unavailable) ledger.store_failures.fetch_add(1);
          continue;
        }
        // Replays are left to the final check, which replays every confirmed key: a replay
        // may come from a record whose commit was never confirmed (and is then lost).
        if (!out.executed()) continue;
        if (!out.recorded()) {
          if (out.commit_failure().message.find("not confirmed") != std::string::npos) {
            ledger.unconfirmed.fetch_add(1);
          }
          continue;
        }
        std::lock_guard lock(ledger.mutex);
        if (!ledger.values.emplace(i, out.value()).second) {
          ADD_FAILURE() << "key " << ids[i] << " was executed and confirmed twice";
        }
        ledger.confirmed[i].store(true);
      }
    });
  }
  return workers;
}

class RedisClusterDisruptionTest : public ClusterFixture {
 protected:
  void SetUp() override { set_up_cluster(/*with_replicas=*/true, "disrupt"); }
};

TEST_F(RedisClusterDisruptionTest, AskDuringAMigrationIsFollowedWithoutUpdatingTheMap) {
  RedisStore store(client_, RedisStoreOptions{.prefix = prefix_});
  IdempotencyGuard guard{store, Options{.scope = "ask"}};
  // A key in a slot that holds no other key: the migration below can end by decree.
  const KeyInAnEmptySlot moving = key_in_an_empty_slot(
      [&](const std::string& key) { return key_slot(record_name(store, "ask", key)); });
  const std::string& id = moving.id;
  const int slot = moving.slot;
  const ClusterNode& source = moving.source;
  ClusterNode target;
  for (const ClusterNode& n : cluster_nodes()) {
    if (n.primary && !n.failed && !n.slots.empty() && n.id != source.id) target = n;
  }
  ASSERT_FALSE(target.id.empty());
  // The target has the scripts cached already (no NOSCRIPT reload adds an ASKING below).
  for (int i = 0;; ++i) {
    const std::string other = "warm-" + std::to_string(i);
    if (owner_of(key_slot(record_name(store, "ask", other))).id != target.id) continue;
    ASSERT_TRUE(guard.execute(other, [] { return std::string("w"); }).recorded());
    break;
  }
  const std::string slot_text = std::to_string(slot);
  ASSERT_EQ(redis_string(*node_client(target.address),
                         {"CLUSTER", "SETSLOT", slot_text, "IMPORTING", source.id}),
            "OK");
  ASSERT_EQ(redis_string(*node_client(source.address),
                         {"CLUSTER", "SETSLOT", slot_text, "MIGRATING", target.id}),
            "OK");
  const long long asking_before = cmdstat_calls(target.address, "asking");
  const RedisStats before = *store.stats().parts.get<RedisStats>();

  // The key is not on the source: it answers ASK, and the record is made on the target.
  int runs = 0;
  auto first = guard.execute(id, [&] { return "v" + std::to_string(++runs); });
  ASSERT_TRUE(first && first.recorded()) << first.message();
  auto replay = guard.execute(id, [&] { return "v" + std::to_string(++runs); });
  ASSERT_TRUE(replay) << replay.message();
  EXPECT_TRUE(replay.replayed());
  EXPECT_EQ(replay.value(), "v1");
  EXPECT_EQ(runs, 1);
  // Each call went to the source first and followed ASK: the map still names the source.
  // (claim + commit, then the replay's claim: three ASKING.)
  EXPECT_EQ(cmdstat_calls(target.address, "asking") - asking_before, 3);
  EXPECT_EQ(store.stats().parts.get<RedisStats>()->asked - before.asked,
            3u);  // stats() counts the same
  EXPECT_EQ(store.stats().parts.get<RedisStats>()->moved, before.moved);

  // The record is on the target (ASKING admits one command, on the same connection).
  const std::string name = record_name(store, "ask", id);
  auto on_target = node_client(target.address);
  ASSERT_EQ(redis_string(*on_target, {"ASKING"}), "OK");
  EXPECT_EQ(redis_string(*on_target, {"TYPE", name}), "hash");
  EXPECT_EQ(redis_string(*node_client(source.address), {"TYPE", name}).rfind("<error ASK ", 0), 0u);
  const long long asking_checked = cmdstat_calls(target.address, "asking");

  // The migration ends: the slot is the target's; the next call meets MOVED and still replays.
  for (const ClusterNode& n : {target, source}) {
    EXPECT_EQ(
        redis_string(*node_client(n.address), {"CLUSTER", "SETSLOT", slot_text, "NODE", target.id}),
        "OK");
  }
  for (const ClusterNode& n : cluster_nodes()) {
    if (n.primary && !n.failed) {
      (void)node_client(n.address)->command({"CLUSTER", "SETSLOT", slot_text, "NODE", target.id});
    }
  }
  auto after = guard.execute(id, [&] { return "v" + std::to_string(++runs); });
  ASSERT_TRUE(after) << after.message();
  EXPECT_EQ(after.value(), "v1");
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(cmdstat_calls(target.address, "asking"), asking_checked);  // no ASK any more
  EXPECT_EQ(store.stats().parts.get<RedisStats>()->moved - before.moved, 1u);
  EXPECT_EQ(store.stats().parts.get<RedisStats>()->asked - before.asked, 3u);
  EXPECT_EQ(owner_of(slot).id, target.id);
}

TEST_F(RedisClusterDisruptionTest, ReshardOfLiveKeysRunsNoCompletedKeyTwice) {
  RedisStore inner(client_, RedisStoreOptions{.prefix = prefix_});
  TimedStore store(inner);
  IdempotencyGuard guard{store, Options{.scope = "reshard"}};
  // The source's lowest slots are the ones redis-cli --cluster reshard moves first, so the source
  // is a primary whose lowest range holds them all: earlier tests on the same cluster (or an
  // earlier run of this one) may have left single slots or short ranges behind.
  constexpr int kMoved = 48;
  ClusterNode source, target;
  for (const ClusterNode& n : cluster_nodes()) {
    if (!n.primary || n.failed || n.slots.empty()) continue;
    const auto [low, high] = *std::min_element(n.slots.begin(), n.slots.end());
    if (source.id.empty() && high - low + 1 >= kMoved) {
      source = n;
    } else if (target.id.empty()) {
      target = n;
    }
  }
  ASSERT_FALSE(source.id.empty()) << "no primary's lowest slot range holds " << kMoved << " slots";
  ASSERT_FALSE(target.id.empty());
  const int first_slot = std::min_element(source.slots.begin(), source.slots.end())->first;
  const std::vector<std::string> ids =
      ids_in_slots(inner, "reshard", first_slot, first_slot + kMoved - 1, 40);
  ASSERT_EQ(ids.size(), 40u);

  Ledger ledger(ids.size());
  std::atomic<bool> stop{false};
  auto workers = start_workers(guard, ids, ledger, stop, 4);
  std::this_thread::sleep_for(200ms);  // every key completed at least once before the move
  const std::string command = "redis-cli" + redis_cli_tls() + " --cluster reshard " +
                              source.address + " --cluster-from " + source.id + " --cluster-to " +
                              target.id + " --cluster-slots " + std::to_string(kMoved) +
                              " --cluster-yes --cluster-pipeline 4 >/dev/null 2>&1";
  const int status = std::system(command.c_str());
  std::this_thread::sleep_for(300ms);
  stop = true;
  for (auto& w : workers) w.join();
  ASSERT_EQ(status, 0) << command;

  EXPECT_EQ(ledger.reruns_after_confirmed.load(), 0);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(ledger.runs[i].load(), 1) << ids[i];
    EXPECT_TRUE(ledger.confirmed[i].load()) << ids[i];
    EXPECT_EQ(owner_of(key_slot(record_name(inner, "reshard", ids[i]))).id, target.id) << ids[i];
  }
  EXPECT_EQ(ledger.store_failures.load(), 0);
  EXPECT_GT(ledger.calls.load(), static_cast<int>(ids.size()) * 4);
  EXPECT_LT(store.longest(), call_bound());
}

TEST_F(RedisClusterDisruptionTest, FailoverAndKilledPrimaryLoseNoConfirmedCommit) {
  RedisStore inner(client_, RedisStoreOptions{.prefix = prefix_,
                                              .durability = {.replicas = 1, .timeout = 100ms}});
  TimedStore store(inner);
  IdempotencyGuard guard{store, Options{.scope = "failover"}};
  // Keys on every shard.
  std::vector<std::string> ids;
  for (int i = 0; i < 60; ++i) ids.push_back("key-" + std::to_string(i));
  std::vector<ClusterNode> primaries;
  for (const ClusterNode& n : cluster_nodes()) {
    if (n.primary && !n.failed && !n.slots.empty()) primaries.push_back(n);
  }
  ASSERT_EQ(primaries.size(), 3u);
  auto replica_of = [](const ClusterNode& primary) {
    for (const ClusterNode& n : cluster_nodes()) {
      if (!n.primary && !n.failed && n.primary_id == primary.id) return n;
    }
    return ClusterNode{};
  };
  auto wait_primary = [](const std::string& id, std::chrono::seconds limit) {
    for (const auto deadline = Clock::now() + limit; Clock::now() < deadline;) {
      for (const ClusterNode& n : cluster_nodes()) {
        if (n.id == id && n.primary) return true;
      }
      std::this_thread::sleep_for(100ms);
    }
    return false;
  };

  Ledger ledger(ids.size());
  std::atomic<bool> stop{false};
  auto workers = start_workers(guard, ids, ledger, stop, 4);
  std::this_thread::sleep_for(300ms);

  // 1. A manual failover: the replica takes over in step with its primary (no write lost);
  //    the old primary answers MOVED from now on.
  const ClusterNode calm = replica_of(primaries[0]);
  ASSERT_FALSE(calm.id.empty());
  EXPECT_EQ(redis_string(*node_client(calm.address), {"CLUSTER", "FAILOVER"}), "OK");
  ASSERT_TRUE(wait_primary(calm.id, 10s)) << "CLUSTER FAILOVER did not promote " << calm.address;
  std::this_thread::sleep_for(300ms);

  // 2. A crash: SIGKILL of another primary; its replica is promoted once the cluster marks the
  //    primary failed (cluster-node-timeout 1 s). It has no replica then: WAIT 1 cannot be met.
  const ClusterNode victim = primaries[1];
  const ClusterNode heir = replica_of(victim);
  ASSERT_FALSE(heir.id.empty());
  const std::string config = node_info(victim.address, "config_file");
  const pid_t pid = static_cast<pid_t>(std::atoll(node_info(victim.address, "process_id").c_str()));
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_TRUE(wait_primary(heir.id, 15s)) << heir.address << " was not promoted";
  // Fresh keys on the heir's slots: their commits cannot be confirmed.
  RedisStore probe_store(client_,
                         RedisStoreOptions{.prefix = prefix_ + "probe:",
                                           .durability = {.replicas = 1, .timeout = 100ms}});
  IdempotencyGuard probe{probe_store, Options{.scope = "probe"}};
  int probes_unconfirmed = 0;
  std::vector<std::pair<int, int>> heir_slots;
  for (const ClusterNode& n : cluster_nodes()) {
    if (n.id == heir.id) heir_slots = n.slots;
  }
  ASSERT_FALSE(heir_slots.empty());
  for (int i = 0; i < 200 && probes_unconfirmed < 3; ++i) {
    const std::string id = "p" + std::to_string(i);
    const int slot = key_slot(record_name(probe_store, "probe", id));
    if (std::none_of(heir_slots.begin(), heir_slots.end(),
                     [&](auto range) { return range.first <= slot && slot <= range.second; })) {
      continue;
    }
    auto out = probe.execute(id, [] { return 1; });
    ASSERT_TRUE(out) << out.message();
    EXPECT_FALSE(out.recorded());
    EXPECT_EQ(out.commit_error(), errc::outcome_unknown);
    EXPECT_NE(out.commit_failure().message.find("commit not confirmed: 0 of 1 replicas"),
              std::string::npos)
        << out.commit_failure().message;
    ++probes_unconfirmed;
  }
  EXPECT_EQ(probes_unconfirmed, 3);
  std::this_thread::sleep_for(300ms);
  stop = true;
  for (auto& w : workers) w.join();

  // The killed node comes back as the heir's replica, for the tests after this one.
  ASSERT_FALSE(config.empty());
  EXPECT_EQ(std::system(("redis-server '" + config + "' >/dev/null 2>&1").c_str()), 0);

  EXPECT_EQ(ledger.reruns_after_confirmed.load(), 0);
  EXPECT_LT(store.longest(), call_bound());
  // Every confirmed result survived both failovers: a repeat replays it, the handler never runs.
  // Checked once the restarted node has rejoined as the heir's replica: until then it still
  // believes its old slot map, and a client that asks it first is told CLUSTERDOWN.
  ASSERT_TRUE(rejoin_as_replica(victim, heir))
      << "the restarted node " << victim.address << " did not become " << heir.address
      << "'s replica:\n"
      << cluster_report();
  ASSERT_TRUE(wait_cluster_ok(30s, /*with_replicas=*/true))
      << "the cluster did not settle after the restart:\n"
      << cluster_report();
  auto fresh_client = connect_cluster(cluster_options());
  ASSERT_NE(fresh_client, nullptr);
  RedisStore again(fresh_client, RedisStoreOptions{.prefix = prefix_});
  IdempotencyGuard check{again, Options{.scope = "failover"}};
  int replayed = 0;
  for (const auto& [i, value] : ledger.values) {
    auto out = check.execute(ids[i], [] { return std::string("ran again"); });
    ASSERT_TRUE(out) << ids[i] << ": " << out.message();
    EXPECT_TRUE(out.replayed()) << ids[i];
    EXPECT_EQ(out.value(), value) << ids[i];
    ++replayed;
  }
  EXPECT_GT(replayed, 0);
}

}  // namespace
}  // namespace idem::testing
