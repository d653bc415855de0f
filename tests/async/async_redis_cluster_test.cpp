// AsyncRedisStore on the Redis Cluster in IDEM_TEST_REDIS_CLUSTER_SEEDS (scripts/lib/cluster.sh
// starts one): the guard's cases and the record-store conformance kit through the async path,
// keys spread over every primary on one connection per node, records shared with a RedisStore
// on a cluster client; and, under change (the AsyncRedisClusterChange suite, run alone), an ASK
// redirection during a slot migration, a reshard of live keys while coroutines on several
// threads call them (MOVED), no key's handler run twice, and a stalled primary failing only its
// own calls.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "async/async_guard_cases.hpp"
#include "async/async_redis_cells.hpp"
#include "idem/engine/effective_key.hpp"
#include "idem/guard.hpp"
#include "idem/redis/admin.hpp"
#include "idem/redis/async_store.hpp"
#include "idem/redis/store.hpp"
#include "idem/testing/async_store_conformance.hpp"
#include "redis/cluster_fixture.hpp"
#include "redis/redis_cluster_support.hpp"
#include "redis/redis_test_support.hpp"
#include "support/free_port.hpp"

namespace idem::testing {

INSTANTIATE_TYPED_TEST_SUITE_P(RedisCluster, AsyncGuardCases, CellBackend<AsyncRedisClusterCell>);

// The same kit with durability on: every claim that acquires and every commit waits for one
// replica of its primary (WAIT), as RedisStoreOptions::durability does on the blocking store.
struct AsyncRedisClusterDurableCell : AsyncRedisClusterCell {
  static std::optional<AsyncRedisStoreOptions> options() {
    std::optional<AsyncRedisStoreOptions> o = AsyncRedisClusterCell::options();
    if (o) o->durability = {.replicas = 1, .timeout = std::chrono::milliseconds{500}};
    return o;
  }
};

}  // namespace idem::testing

IDEM_ASYNC_STORE_CONFORMANCE(AsyncRedisCluster, idem::testing::AsyncRedisClusterCell);
IDEM_ASYNC_STORE_CONFORMANCE(AsyncRedisClusterDurable, idem::testing::AsyncRedisClusterDurableCell);

namespace idem::testing {
namespace {

using namespace std::chrono_literals;
using redis::key_slot;

std::string record_name(const AsyncRedisStore& store, std::string_view scope, std::string_view id) {
  return store.record_key(detail::EffectiveKey(scope, {}, id).view());
}

// The live primaries that serve slots.
std::vector<ClusterNode> serving_primaries() {
  std::vector<ClusterNode> out;
  for (ClusterNode& n : cluster_nodes()) {
    if (n.primary && !n.failed && !n.slots.empty()) out.push_back(std::move(n));
  }
  return out;
}

long long cmdstat_calls(const std::string& address, std::string_view command) {
  auto c = node_client(address);
  Result<redis::Reply> info = c->command({"INFO", "commandstats"});
  if (!info) return -1;
  const std::string key = "cmdstat_" + std::string(command) + ":calls=";
  const auto at = info->str.find(key);
  return at == std::string::npos ? 0 : std::atoll(info->str.c_str() + at + key.size());
}

// Waits (up to `limit`) until no live node's CLUSTER NODES flags another as failing (fail or
// fail?), as after a node was paused.
bool wait_no_suspected_node(std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    bool clear = true;
    for (const std::string& address : seed_addresses()) {
      Result<redis::Reply> nodes = node_client(address)->command({"CLUSTER", "NODES"});
      if (!nodes || nodes->str.find("fail") != std::string::npos) clear = false;
    }
    if (clear) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

// What many coroutines saw, per key: handler runs and the values their calls answered.
struct Ledger {
  explicit Ledger(std::size_t keys) : runs(keys) {}
  std::vector<std::atomic<int>> runs;
  std::mutex mutex;
  std::map<std::size_t, std::set<std::string>> values;
  std::atomic<int> failures{0};
  std::atomic<int> calls{0};
  std::string first_failure;
};

// Starts `coroutines` coroutines on `io` that call the keys `ids` through `guard`, in turn, until
// `stop`; `finished` counts those that ended.
void spawn_callers(net::io_context& io, AsyncGuard<AsyncRedisStore>& guard,
                   const std::vector<std::string>& ids, Ledger& ledger, std::atomic<bool>& stop,
                   std::atomic<int>& finished, int coroutines) {
  for (int c = 0; c < coroutines; ++c) {
    net::co_spawn(
        io,
        [&, c]() -> net::awaitable<void> {
          for (std::size_t n = static_cast<std::size_t>(c); !stop.load(); ++n) {
            const std::size_t i = (n * 7) % ids.size();
            auto out =
                co_await guard.async_execute(ids[i], [&, i, c, n]() -> net::awaitable<std::string> {
                  ledger.runs[i].fetch_add(1);
                  co_await pause(1ms);
                  co_return ids[i] + " by " + std::to_string(c) + "/" + std::to_string(n);
                });
            ledger.calls.fetch_add(1);
            std::lock_guard lock(ledger.mutex);
            if (!out) {
              if (ledger.failures.fetch_add(1) == 0) ledger.first_failure = out.message();
              continue;
            }
            ledger.values[i].insert(out.value());
          }
          finished.fetch_add(1);
        },
        net::detached);
  }
}

// 32 coroutines calling `ids` through `guard` on the test's thread and one more while `change`
// runs on a thread of its own, until it has returned; then every call is done.
template <class Change>
void call_during_change(IoRunner& runner, AsyncGuard<AsyncRedisStore>& guard,
                        const std::vector<std::string>& ids, Ledger& ledger, Change change) {
  std::atomic<bool> stop{false};
  std::atomic<int> finished{0};
  constexpr int kCoroutines = 32;
  spawn_callers(runner.io(), guard, ids, ledger, stop, finished, kCoroutines);
  std::thread second([&] { runner.run_until([&] { return finished.load() == kCoroutines; }); });
  std::thread changer([&] {
    change();
    stop = true;
  });
  runner.run_until([&] { return finished.load() == kCoroutines; });
  changer.join();
  second.join();
}

class AsyncRedisClusterTest : public ClusterFixture {
 protected:
  void SetUp() override { set_up_cluster(/*with_replicas=*/false, "acluster"); }
};

// Each record lands on its slot's primary, every primary gets some, and the store keeps one
// connection per node it used.
TEST_F(AsyncRedisClusterTest, KeysSpreadOverEveryPrimaryOnOneConnectionEach) {
  const std::vector<ClusterNode> primaries = serving_primaries();
  ASSERT_GE(primaries.size(), 3u);
  // A primary first among the seeds: the map is read from a node the calls use anyway (after a
  // failover in an earlier test, the first seed may be a replica).
  AsyncRedisStoreOptions options = async_cluster_options(prefix_);
  options.cluster_seeds.insert(options.cluster_seeds.begin(), primaries.front().address);
  IoRunner runner;
  AsyncRedisStore store(runner.io().get_executor(), options);
  AsyncGuard guard{store, Options{.scope = "spread"}};
  constexpr int kKeys = 60;
  for (int i = 0; i < kKeys; ++i) {
    auto out = runner.run(guard.async_execute("id-" + std::to_string(i), [i] { return i; }));
    ASSERT_TRUE(out.recorded()) << out.message();
  }
  std::map<std::string, int> per_node;
  for (int i = 0; i < kKeys; ++i) {
    const std::string name = record_name(store, "spread", "id-" + std::to_string(i));
    const ClusterNode owner = owner_of(key_slot(name));
    EXPECT_EQ(redis_string(*node_client(owner.address), {"TYPE", name}), "hash") << name;
    ++per_node[owner.id];
  }
  for (const ClusterNode& n : primaries) EXPECT_GT(per_node[n.id], 0) << n.address;
  EXPECT_EQ(store.connections_opened(), primaries.size());
  EXPECT_EQ(store.slot_map_reads(), 1u);
  EXPECT_EQ(store.moved(), 0u);
  // Replays come from every node too.
  for (int i = 0; i < kKeys; ++i) {
    auto again = runner.run(guard.async_execute("id-" + std::to_string(i), [] { return -1; }));
    ASSERT_TRUE(again.replayed()) << again.message();
    EXPECT_EQ(again.value(), i);
  }
}

// A RedisStore on a cluster client and an AsyncRedisStore on the same cluster with one prefix
// serve the same records.
TEST_F(AsyncRedisClusterTest, SharesItsRecordsWithRedisStoreOnTheCluster) {
  RedisStore blocking(client_, RedisStoreOptions{.prefix = prefix_});
  IoRunner runner;
  AsyncRedisStore async(runner.io().get_executor(), async_cluster_options(prefix_));
  IdempotencyGuard sync_guard{blocking, Options{.scope = "shared"}};
  AsyncGuard async_guard{async, Options{.scope = "shared"}};
  int runs = 0;
  for (int i = 0; i < 12; ++i) {
    const std::string a = "a" + std::to_string(i);
    const std::string b = "b" + std::to_string(i);
    ASSERT_TRUE(sync_guard.execute(a, [&] { return ++runs; }).recorded());
    auto replay = runner.run(async_guard.async_execute(a, [&] { return ++runs; }));
    ASSERT_TRUE(replay.replayed()) << replay.message();
    ASSERT_TRUE(runner.run(async_guard.async_execute(b, [&] { return ++runs; })).recorded());
    auto back = sync_guard.execute(b, [&] { return ++runs; });
    ASSERT_TRUE(back.replayed()) << back.message();
  }
  EXPECT_EQ(runs, 24);
}

// Durability on the cluster, whose primaries have a replica each: WAIT runs on the primary that
// took each write (the claim that acquired, the commit), the replica acknowledges, and every
// result is recorded; a replay writes nothing and waits for nothing.
TEST_F(AsyncRedisClusterTest, DurableWritesWaitOnTheirPrimaryAndAreConfirmed) {
  ASSERT_TRUE(wait_cluster_ok(20s, /*with_replicas=*/true)) << cluster_report();
  const std::vector<ClusterNode> primaries = serving_primaries();
  const auto waits = [&] {
    long long total = 0;
    for (const ClusterNode& n : primaries) total += cmdstat_calls(n.address, "wait");
    return total;
  };
  AsyncRedisStoreOptions options = async_cluster_options(prefix_);
  options.durability = {.replicas = 1, .timeout = 500ms};
  IoRunner runner;
  AsyncRedisStore store(runner.io().get_executor(), options);
  AsyncGuard guard{store, Options{.scope = "durable"}};
  constexpr int kKeys = 12;
  const long long before = waits();
  for (int i = 0; i < kKeys; ++i) {
    auto out = runner.run(guard.async_execute("id-" + std::to_string(i), [i] { return i; }));
    ASSERT_TRUE(out.recorded()) << out.message();
  }
  // Other clients of the shared cluster may WAIT too: at least this store's.
  EXPECT_GE(waits() - before, 2 * kKeys);
  EXPECT_EQ(store.replication_timeouts(), 0u);
  for (int i = 0; i < kKeys; ++i) {
    auto again = runner.run(guard.async_execute("id-" + std::to_string(i), [] { return -1; }));
    ASSERT_TRUE(again.replayed()) << again.message();
    EXPECT_EQ(again.value(), i);
  }
  EXPECT_EQ(store.replication_timeouts(), 0u);
}

// Seeds that name no listening node: calls fail with store_unavailable within the call's
// deadline; a configuration no cluster allows is refused at construction with its reason.
TEST_F(AsyncRedisClusterTest, UnreachableSeedsAndUnusableSettingsFailWithAReason) {
  IoRunner runner;
  AsyncRedisStoreOptions dead = async_cluster_options(prefix_);
  dead.cluster_seeds = {"127.0.0.1:1"};
  AsyncRedisStore nowhere(runner.io().get_executor(), dead);
  const auto start = std::chrono::steady_clock::now();
  auto claim = runner.run(nowhere.async_claim(ClaimRequest{.key = "k", .lease = 1s}));
  ASSERT_FALSE(claim);
  EXPECT_EQ(claim.error(), errc::store_unavailable);
  EXPECT_NE(claim.failure().message.find("127.0.0.1:1"), std::string::npos)
      << claim.failure().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start,
            dead.connection.connect_timeout + dead.connection.command_timeout + 1s);

  // Options no cluster allows: refused at construction (a programming error, not an outage).
  auto refusal = [&](const AsyncRedisStoreOptions& o) {
    try {
      AsyncRedisStore store(runner.io().get_executor(), o);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("not refused");
  };
  AsyncRedisStoreOptions on_db = async_cluster_options(prefix_);
  on_db.connection.db = 2;
  EXPECT_NE(refusal(on_db).find("database 0"), std::string::npos) << refusal(on_db);
  AsyncRedisStoreOptions on_socket = async_cluster_options(prefix_);
  on_socket.connection.unix_socket = "/tmp/redis.sock";
  EXPECT_NE(refusal(on_socket).find("TCP"), std::string::npos) << refusal(on_socket);
  AsyncRedisStoreOptions bad_seed = async_cluster_options(prefix_);
  bad_seed.cluster_seeds.push_back("127.0.0.1:x");
  EXPECT_NE(refusal(bad_seed).find("'127.0.0.1:x' is not host:port"), std::string::npos)
      << refusal(bad_seed);
}

// A listening socket that never accepts nor reads: a connect to it succeeds (the kernel's
// backlog) and a command sent there gets no reply, like a node that stalled.
class SilentNode {
 public:
  SilentNode() {
    const LoopbackListener listening = listen_on_loopback(64);
    fd_ = listening.fd;
    port_ = listening.port;
  }
  ~SilentNode() {
    if (fd_ >= 0) ::close(fd_);
  }
  SilentNode(const SilentNode&) = delete;
  SilentNode& operator=(const SilentNode&) = delete;
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Seeds that take the connection and never answer: the slot map is read from them one after
// another, each read bounded by its connection's watchdog; a call waiting for the map gives up
// at its own deadline (connect_timeout + command_timeout) rather than after every read.
TEST(AsyncRedisClusterSeeds, ACallWaitingForTheMapGivesUpAtItsDeadline) {
  std::vector<std::unique_ptr<SilentNode>> silent;
  AsyncRedisStoreOptions options;
  options.connection.connect_timeout = std::chrono::milliseconds{100};
  options.connection.command_timeout = std::chrono::milliseconds{500};
  for (int i = 0; i < 4; ++i) {
    silent.push_back(std::make_unique<SilentNode>());
    ASSERT_NE(silent.back()->port(), 0);
    options.cluster_seeds.push_back(silent.back()->address());
  }
  IoRunner runner;
  AsyncRedisStore store(runner.io().get_executor(), options);
  const auto start = std::chrono::steady_clock::now();
  auto claim = runner.run(store.async_claim(ClaimRequest{.key = "k", .lease = 1s}));
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(claim);
  EXPECT_EQ(claim.error(), errc::store_unavailable) << claim.failure().message;
  EXPECT_NE(claim.failure().message.find("slot map"), std::string::npos) << claim.failure().message;
  // The deadline is 600 ms; reading the four seeds in turn takes at least 4 x 500 ms.
  EXPECT_GE(took, std::chrono::milliseconds{550});
  EXPECT_LT(took, std::chrono::milliseconds{1500});
}

// --- The cluster under change (run alone)
// ---------------------------------------------------------
class AsyncRedisClusterChange : public AsyncRedisClusterTest {};

// During a slot migration the source answers ASK for a key it no longer has: the call goes to
// the target once after ASKING, the slot map is left alone; when the migration ends the next
// call meets MOVED, learns the new owner and still replays.
TEST_F(AsyncRedisClusterChange, AskDuringAMigrationThenMovedWhenItEnds) {
  IoRunner runner;
  AsyncRedisStore store(runner.io().get_executor(), async_cluster_options(prefix_));
  AsyncGuard guard{store, Options{.scope = "ask"}};
  // A key in a slot that holds no other key: the migration below can end by decree.
  const KeyInAnEmptySlot moving = key_in_an_empty_slot(
      [&](const std::string& key) { return key_slot(record_name(store, "ask", key)); });
  const std::string& id = moving.id;
  const int slot = moving.slot;
  const ClusterNode& source = moving.source;
  ClusterNode target;
  for (const ClusterNode& n : serving_primaries()) {
    if (n.id != source.id) target = n;
  }
  ASSERT_FALSE(target.id.empty());
  // A call on each node first: their connections are open and the scripts cached there.
  std::set<std::string> warmed;
  for (int i = 0; warmed.size() < 2; ++i) {
    const std::string other = "warm-" + std::to_string(i);
    const std::string owner = owner_of(key_slot(record_name(store, "ask", other))).id;
    if ((owner != target.id && owner != source.id) || warmed.count(owner) != 0) continue;
    ASSERT_TRUE(runner.run(guard.async_execute(other, [] { return 0; })).recorded());
    warmed.insert(owner);
  }
  const std::string slot_text = std::to_string(slot);
  ASSERT_EQ(redis_string(*node_client(target.address),
                         {"CLUSTER", "SETSLOT", slot_text, "IMPORTING", source.id}),
            "OK");
  ASSERT_EQ(redis_string(*node_client(source.address),
                         {"CLUSTER", "SETSLOT", slot_text, "MIGRATING", target.id}),
            "OK");
  const long long asking_before = cmdstat_calls(target.address, "asking");
  const std::uint64_t asked_before = store.asked();

  // Many coroutines on the migrating key at once: each call follows ASK, one handler runs.
  std::atomic<int> runs{0};
  std::atomic<int> finished{0};
  std::mutex mutex;
  std::set<std::string> answers;
  constexpr int kCallers = 16;
  AsyncGuard waiting{store, Options{.scope = "ask", .in_progress = Wait{.timeout = 10s}}};
  for (int c = 0; c < kCallers; ++c) {
    net::co_spawn(
        runner.io(),
        [&]() -> net::awaitable<void> {
          auto out = co_await waiting.async_execute(id, [&]() -> net::awaitable<std::string> {
            co_await pause(5ms);
            co_return "v" + std::to_string(runs.fetch_add(1) + 1);
          });
          std::lock_guard lock(mutex);
          answers.insert(out ? out.value() : "failed: " + out.message());
          finished.fetch_add(1);
        },
        net::detached);
  }
  runner.run_until([&] { return finished.load() == kCallers; });
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(answers, std::set<std::string>{"v1"});
  // Every call went to the source first, then to the target after ASKING.
  const long long asking = cmdstat_calls(target.address, "asking") - asking_before;
  EXPECT_GE(asking, kCallers + 1);  // each caller's claim, and the commit
  EXPECT_EQ(static_cast<long long>(store.asked() - asked_before), asking);
  EXPECT_EQ(store.moved(), 0u);
  // The record is on the target.
  const std::string name = record_name(store, "ask", id);
  auto on_target = node_client(target.address);
  ASSERT_EQ(redis_string(*on_target, {"ASKING"}), "OK");
  EXPECT_EQ(redis_string(*on_target, {"TYPE", name}), "hash");

  // The migration ends: the slot is the target's; the next call meets MOVED and replays.
  for (const ClusterNode& n : cluster_nodes()) {
    if (n.primary && !n.failed) {
      (void)node_client(n.address)->command({"CLUSTER", "SETSLOT", slot_text, "NODE", target.id});
    }
  }
  const long long asking_done = cmdstat_calls(target.address, "asking");
  auto after = runner.run(guard.async_execute(id, [] { return std::string("again"); }));
  ASSERT_TRUE(after.replayed()) << after.message();
  EXPECT_EQ(after.value(), "v1");
  EXPECT_EQ(store.moved(), 1u);
  EXPECT_EQ(cmdstat_calls(target.address, "asking"), asking_done);  // no ASK any more
  auto once_more = runner.run(guard.async_execute(id, [] { return std::string("again"); }));
  ASSERT_TRUE(once_more.replayed()) << once_more.message();
  EXPECT_EQ(store.moved(), 1u);  // the map learnt the new owner
  EXPECT_EQ(owner_of(slot).id, target.id);
}

// redis-cli --cluster reshard moves slots with live keys while 32 coroutines on two threads
// call them: calls follow ASK during each slot's move and MOVED after it, no call fails, and
// each key's handler runs once.
TEST_F(AsyncRedisClusterChange, ReshardOfLiveKeysRunsEachKeyOnce) {
  IoRunner runner;
  AsyncRedisStore store(runner.io().get_executor(), async_cluster_options(prefix_));
  AsyncGuard guard{store, Options{.scope = "reshard", .in_progress = Wait{.timeout = 10s}}};
  // The source's lowest slots are the ones reshard moves first: a primary whose lowest range
  // holds them all (earlier tests may have left single slots behind).
  constexpr int kMoved = 32;
  ClusterNode source, target;
  for (const ClusterNode& n : serving_primaries()) {
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
  std::vector<std::string> ids;
  for (int i = 0; ids.size() < 40 && i < 10'000'000; ++i) {
    std::string id = "id-" + std::to_string(i);
    const int slot = key_slot(record_name(store, "reshard", id));
    if (first_slot <= slot && slot < first_slot + kMoved) ids.push_back(std::move(id));
  }
  ASSERT_EQ(ids.size(), 40u);

  Ledger ledger(ids.size());
  call_during_change(runner, guard, ids, ledger, [&] {
    std::this_thread::sleep_for(200ms);  // every key completed before the move
    const std::string command = "redis-cli" + redis_cli_tls() + " --cluster reshard " +
                                source.address + " --cluster-from " + source.id + " --cluster-to " +
                                target.id + " --cluster-slots " + std::to_string(kMoved) +
                                " --cluster-yes --cluster-pipeline 4 >/dev/null 2>&1";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    std::this_thread::sleep_for(300ms);
  });

  EXPECT_EQ(ledger.failures.load(), 0) << ledger.first_failure;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(ledger.runs[i].load(), 1) << ids[i];
    EXPECT_EQ(ledger.values[i].size(), 1u) << ids[i];
    EXPECT_EQ(owner_of(key_slot(record_name(store, "reshard", ids[i]))).id, target.id) << ids[i];
  }
  EXPECT_GT(ledger.calls.load(), static_cast<int>(ids.size()) * 4);
  EXPECT_GT(store.moved(), 0u);
}

// A manual failover (CLUSTER FAILOVER on a replica) while 32 coroutines on two threads call keys
// on every primary: the old primary answers MOVED to a node the map knew as a replica, the store
// reads the whole map again, no call fails and each key's handler runs once.
TEST_F(AsyncRedisClusterChange, AManualFailoverIsFollowedAndNoKeyRunsTwice) {
  const std::vector<ClusterNode> primaries = serving_primaries();
  ASSERT_GE(primaries.size(), 3u);
  ClusterNode replica;  // of a primary that serves slots
  for (const ClusterNode& n : cluster_nodes()) {
    for (const ClusterNode& p : primaries) {
      if (!n.primary && !n.failed && n.primary_id == p.id) replica = n;
    }
  }
  ASSERT_FALSE(replica.id.empty()) << "no primary has a replica";
  const std::string old_primary = replica.primary_id;
  IoRunner runner;
  AsyncRedisStore store(runner.io().get_executor(), async_cluster_options(prefix_));
  AsyncGuard guard{store, Options{.scope = "failover", .in_progress = Wait{.timeout = 10s}}};
  std::vector<std::string> ids;
  for (int i = 0; i < 40; ++i) ids.push_back("id-" + std::to_string(i));

  Ledger ledger(ids.size());
  bool promoted = false;
  call_during_change(runner, guard, ids, ledger, [&] {
    std::this_thread::sleep_for(200ms);
    EXPECT_EQ(redis_string(*node_client(replica.address), {"CLUSTER", "FAILOVER"}), "OK");
    for (const auto deadline = std::chrono::steady_clock::now() + 10s;
         !promoted && std::chrono::steady_clock::now() < deadline;) {
      for (const ClusterNode& n : cluster_nodes()) promoted |= n.id == replica.id && n.primary;
      if (!promoted) std::this_thread::sleep_for(50ms);
    }
    std::this_thread::sleep_for(300ms);
  });

  ASSERT_TRUE(promoted) << "CLUSTER FAILOVER did not promote " << replica.address;
  EXPECT_EQ(ledger.failures.load(), 0) << ledger.first_failure;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(ledger.runs[i].load(), 1) << ids[i];
    EXPECT_EQ(ledger.values[i].size(), 1u) << ids[i];
  }
  EXPECT_GT(store.moved(), 0u);
  EXPECT_GE(store.slot_map_reads(), 2u);  // the new primary was not in the first map
  // Settled for the next test: the old primary a replica of the new one, replicas in sync.
  bool demoted = false;
  for (const auto deadline = std::chrono::steady_clock::now() + 10s;
       !demoted && std::chrono::steady_clock::now() < deadline;) {
    for (const ClusterNode& n : cluster_nodes()) {
      demoted |= n.id == old_primary && !n.primary && n.primary_id == replica.id;
    }
    if (!demoted) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(demoted) << "the old primary did not become a replica of " << replica.address;
  EXPECT_TRUE(wait_cluster_ok(20s, /*with_replicas=*/true)) << cluster_report();
}

// A primary stopped (SIGSTOP) for less than the cluster's node timeout, so that no failover
// starts: a commit in flight to it fails with outcome_unknown after command_timeout and a claim
// for its slots with store_unavailable at once (its connection is in backoff), while calls to
// the other primaries go on; once it runs again, the commit's retry lands and the key replays.
TEST_F(AsyncRedisClusterChange, AStalledPrimaryFailsOnlyItsOwnCallsThenRecovers) {
  IoRunner runner;
  AsyncRedisStoreOptions options = async_cluster_options(prefix_);
  options.connection.command_timeout = 150ms;
  options.reconnect_backoff = 300ms;
  AsyncRedisStore store(runner.io().get_executor(), options);
  // Two keys on one primary, one on another.
  std::string held, other_same, elsewhere;
  ClusterNode stalled;
  for (int i = 0; held.empty() || other_same.empty() || elsewhere.empty(); ++i) {
    const std::string id = "k" + std::to_string(i);
    const ClusterNode owner = owner_of(key_slot(store.record_key(id)));
    if (stalled.id.empty()) stalled = owner;
    if (owner.id == stalled.id) {
      if (held.empty()) {
        held = id;
      } else if (other_same.empty()) {
        other_same = id;
      }
    } else if (elsewhere.empty()) {
      elsewhere = id;
    }
  }
  auto claim = [&](const std::string& key) {
    return runner.run(store.async_claim(ClaimRequest{.key = key, .lease = 5s, .retention = 60s}));
  };
  Result<Claim> first = claim(held);
  ASSERT_TRUE(first && first->status == ClaimStatus::acquired);
  ASSERT_TRUE(claim(elsewhere));  // both connections open
  const Ticket ticket{.key = held, .fence = first->fence};
  const Completion done{.status = ClaimStatus::completed, .result = "r", .ttl = 60s};

  const std::string port = stalled.address.substr(stalled.address.rfind(':') + 1);
  const char* dir = std::getenv("IDEM_TEST_REDIS_CLUSTER_DIR");
  ASSERT_NE(dir, nullptr) << "scripts/lib/cluster.sh exports IDEM_TEST_REDIS_CLUSTER_DIR";
  std::string pid_text;
  {
    std::ifstream in(std::string(dir) + "/" + port + "/redis.pid");
    in >> pid_text;
  }
  ASSERT_FALSE(pid_text.empty());
  const pid_t node_pid = static_cast<pid_t>(std::stol(pid_text));
  ASSERT_EQ(::kill(node_pid, SIGSTOP), 0);
  const auto stopped_at = std::chrono::steady_clock::now();
  Status commit = runner.run(store.async_commit(ticket, done));
  const auto commit_took = std::chrono::steady_clock::now() - stopped_at;
  const auto before_other = std::chrono::steady_clock::now();
  Result<Claim> same = claim(other_same);
  const auto same_took = std::chrono::steady_clock::now() - before_other;
  Result<Claim> other = claim(elsewhere + "-2");
  ASSERT_EQ(::kill(node_pid, SIGCONT), 0);
  const auto stalled_for = std::chrono::steady_clock::now() - stopped_at;
  // The next test may reshard: first let every node clear the suspicion the pause raised.
  EXPECT_TRUE(wait_no_suspected_node(10s)) << "a node still flags another as failing";

  ASSERT_FALSE(commit.ok());
  EXPECT_EQ(commit.error(), errc::outcome_unknown) << commit.failure().message;
  EXPECT_LT(commit_took, 900ms);
  ASSERT_FALSE(same);
  EXPECT_EQ(same.error(), errc::store_unavailable) << same.failure().message;
  EXPECT_LT(same_took, options.reconnect_backoff);  // no wait for the backoff, nor a retry
  EXPECT_TRUE(other) << other.failure().message;
  EXPECT_LT(stalled_for, 1000ms) << "long enough for the cluster to start a failover";

  // Running again, after the backoff: the commit's retry lands, and the key replays.
  std::this_thread::sleep_for(options.reconnect_backoff * 2);
  Status retried = runner.run(store.async_commit(ticket, done));
  EXPECT_TRUE(retried.ok()) << retried.failure().message;
  Result<Claim> replay = claim(held);
  ASSERT_TRUE(replay);
  EXPECT_EQ(replay->status, ClaimStatus::completed);
}

}  // namespace
}  // namespace idem::testing
