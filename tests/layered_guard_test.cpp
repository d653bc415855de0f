// LayeredGuard over the memory stores: which layer answers, ordering of commits and aborts,
// refusals, the layer-down policy, and fn running once under racing threads.

#include "idem/layered_guard.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "idem/idem.hpp"
#include "idem/memory/request_id_cache.hpp"
#include "idem/memory/token_store.hpp"
#include "support/flaky_store.hpp"

namespace idem {
namespace {

using namespace std::chrono_literals;

// Logs every commit and abort into a shared journal and can be switched "down".
template <class S>
class Spy {
 public:
  Spy(S& inner, std::string name, std::vector<std::string>& journal, std::mutex& m)
      : inner_(inner), name_(std::move(name)), journal_(journal), mutex_(m) {}
  std::atomic<bool> down{false};
  std::atomic<int> claims{0};

  Result<Claim> claim(const ClaimRequest& r) {
    claims.fetch_add(1);
    if (down) return make_failure(errc::store_unavailable, name_ + " is down");
    return inner_.claim(r);
  }
  Status commit(const Ticket& t, const Completion& c) {
    log("commit");
    return inner_.commit(t, c);
  }
  Status abort(const Ticket& t) {
    log("abort");
    return inner_.abort(t);
  }
  Status extend(const Ticket& t, std::chrono::milliseconds l) { return inner_.extend(t, l); }

 private:
  void log(const char* what) {
    std::lock_guard lock(mutex_);
    journal_.push_back(name_ + ":" + what);
  }
  S& inner_;
  std::string name_;
  std::vector<std::string>& journal_;
  std::mutex& mutex_;
};

struct Fixture : ::testing::Test {
  MemoryRequestIdCache cache;
  MemoryTokenStore tokens;
  MemoryStore records;
  std::vector<std::string> journal;
  std::mutex journal_mutex;
  Spy<MemoryRequestIdCache> gateway{cache, "gateway", journal, journal_mutex};
  Spy<MemoryTokenStore> token_spy{tokens, "token", journal, journal_mutex};
  Spy<MemoryStore> db{records, "db", journal, journal_mutex};

  using Guard = LayeredGuard<RequestIdLayer<Spy<MemoryRequestIdCache>>,
                             TokenLayer<Spy<MemoryTokenStore>>, RecordLayer<Spy<MemoryStore>>>;

  Guard make(LayeredOptions options = {}) {
    return Guard(
        std::move(options),
        RequestIdLayer(gateway, LayerSettings{.name = "gateway",
                                              .scope = cache.options().scope,
                                              .ttl = *cache.options().ttl}),
        TokenLayer(token_spy, LayerSettings{.name = "token", .scope = tokens.options().scope}),
        RecordLayer(db, LayerSettings{.name = "db", .scope = "payments"}));
  }
  std::string token() { return tokens.issue(1min).value(); }
  void clear() {
    std::lock_guard lock(journal_mutex);
    journal.clear();
  }
};

// LayeredOptions::policy is the guards' Options: its shared fields apply at every layer, one set
// keeps the others' defaults, and the fields each layer has of its own are refused there.
TEST_F(Fixture, PolicyIsTheGuardsOptionsAndRefusesTheLayersOwnFields) {
  EXPECT_THROW((void)make(LayeredOptions{.policy = {.scope = "payments"}}), std::invalid_argument);
  EXPECT_THROW((void)make(LayeredOptions{.policy = {.lease = 1s}}), std::invalid_argument);
  EXPECT_THROW((void)make(LayeredOptions{.policy = {.ttl = 1h}}), std::invalid_argument);
  EXPECT_THROW((void)make(LayeredOptions{.policy = {.keep_request = true}}), std::invalid_argument);
  EXPECT_THROW((void)make(LayeredOptions{.policy = {.hash = nullptr}}), std::invalid_argument);
  auto guard = make(LayeredOptions{.policy = {.max_key_size = 64}});
  EXPECT_EQ(guard.options().policy.max_result_size, Options{}.max_result_size);
  EXPECT_FALSE(guard.options().policy.remember_failures);
  int runs = 0;
  auto too_long = guard.execute(LayeredRequest{std::string(65, 'r'), token(), "o", "alice", ""},
                                [&] { ++runs; });
  EXPECT_EQ(too_long.error(), errc::key_invalid);
  auto fits = guard.execute(LayeredRequest{"req-1", token(), "o", "alice", ""}, [&] { ++runs; });
  EXPECT_TRUE(fits.executed()) << fits.message();
  EXPECT_EQ(runs, 1);
}

TEST_F(Fixture, FreshRunCommitsInnermostFirstAndRepeatsReplayFromTheGateway) {
  auto guard = make();
  const std::string t = token();
  const LayeredRequest req{"req-1", t, "order-1", "alice", "{\"amount\":5}"};
  int runs = 0;
  auto fresh = guard.execute(req, [&] { return std::string("receipt-") + std::to_string(++runs); });
  ASSERT_TRUE(fresh.has_value()) << fresh.message();
  EXPECT_TRUE(fresh.executed());
  EXPECT_TRUE(fresh.recorded());
  EXPECT_EQ(fresh.layer(), kHandlerLayer);
  EXPECT_EQ(fresh.layer_name(), "handler");
  EXPECT_EQ(journal, (std::vector<std::string>{"db:commit", "token:commit", "gateway:commit"}));

  auto again = guard.execute(req, [&] { return std::string("receipt-") + std::to_string(++runs); });
  ASSERT_TRUE(again.has_value());
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(again.value(), "receipt-1");
  EXPECT_EQ(again.layer(), 0u);
  EXPECT_EQ(again.layer_name(), "gateway");
  EXPECT_EQ(token_spy.claims.load(), 1) << "a gateway replay never reaches the token layer";
  EXPECT_EQ(runs, 1);
}

TEST_F(Fixture, BeginsAnswerNamesTheLayerThatAnsweredAsExecuteDoes) {
  auto guard = make();
  const std::string t = token();
  const LayeredRequest req{"req-2", t, "order-2", "alice", "{\"amount\":7}"};
  auto first = guard.begin<std::string>(req);
  ASSERT_TRUE(first.acquired());
  EXPECT_THROW((void)guard.answer(std::move(first)), std::logic_error);
  ASSERT_TRUE(first.acquired()) << "a refused answer() leaves the hold alone";

  // Held: a second request is refused by the gateway, the first layer that sees it.
  auto busy = guard.answer(guard.begin<std::string>(req));
  EXPECT_EQ(busy.error(), errc::in_progress);
  EXPECT_EQ(busy.layer(), 0u);
  EXPECT_EQ(busy.layer_name(), "gateway");
  EXPECT_GT(busy.retry_after().count(), 0);

  ASSERT_TRUE(first.commit("receipt-7"));
  // The gateway now replays what the record committed.
  auto replay = guard.answer(guard.begin<std::string>(req));
  ASSERT_TRUE(replay.replayed()) << replay.message();
  EXPECT_EQ(replay.value(), "receipt-7");
  EXPECT_EQ(replay.layer_name(), "gateway");

  // Only the record layer knows this business key under another request id: it answers.
  const LayeredRequest other_id{"req-3", token(), "order-2", "alice", "{\"amount\":7}"};
  auto from_record = guard.answer(guard.begin<std::string>(other_id));
  ASSERT_TRUE(from_record.replayed()) << from_record.message();
  EXPECT_EQ(from_record.layer(), 2u);
  EXPECT_EQ(from_record.layer_name(), "db");
}

TEST_F(Fixture, ReplayFromAnInnerLayerAbortsTheOuterClaimsOutermostLast) {
  auto guard = make();
  const std::string t = token();
  int runs = 0;
  ASSERT_TRUE(guard.execute({"req-1", t, "order-1", "alice", "p"}, [&] { return ++runs; }));
  clear();
  // A new request id (the gateway misses) with the same token: the token layer answers.
  auto by_token = guard.execute({"req-2", t, "order-1", "alice", "p"}, [&] { return ++runs; });
  ASSERT_TRUE(by_token.has_value()) << by_token.message();
  EXPECT_EQ(by_token.layer_name(), "token");
  EXPECT_EQ(by_token.value(), 1);
  EXPECT_EQ(journal, (std::vector<std::string>{"gateway:abort"}));
  clear();
  // A new request id and a new token, same business key: the record answers; the token claimed
  // on the way is aborted first (back to pending), the gateway last.
  const std::string t2 = token();
  auto by_db = guard.execute({"req-3", t2, "order-1", "alice", "p"}, [&] { return ++runs; });
  ASSERT_TRUE(by_db.has_value()) << by_db.message();
  EXPECT_EQ(by_db.layer(), 2u);
  EXPECT_EQ(by_db.layer_name(), "db");
  EXPECT_EQ(journal, (std::vector<std::string>{"token:abort", "gateway:abort"}));
  EXPECT_EQ(runs, 1);
  // The aborted token is pending again: a fresh intent may still use it.
  auto other = guard.execute({"req-4", t2, "order-2", "alice", "p"}, [&] { return ++runs; });
  ASSERT_TRUE(other.has_value()) << other.message();
  EXPECT_TRUE(other.executed());
  EXPECT_EQ(runs, 2);
}

TEST_F(Fixture, RejectionStopsTheChain) {
  auto guard = make();
  int runs = 0;
  auto bad = guard.execute({"req-1", "AAAAAAAAAAAAAAAAAAAAAA", "order-1", "alice", "p"},
                           [&] { return ++runs; });
  EXPECT_EQ(bad.error(), errc::token_invalid);
  EXPECT_EQ(bad.layer_name(), "token");
  EXPECT_EQ(db.claims.load(), 0);
  EXPECT_EQ(journal, (std::vector<std::string>{"gateway:abort"}));
  EXPECT_EQ(runs, 0);

  auto malformed =
      guard.execute({"req-2", "nope", "order-1", "alice", "p"}, [&] { return ++runs; });
  EXPECT_EQ(malformed.error(), errc::token_invalid);
  auto no_key = guard.execute({"req-3", token(), "", "alice", "p"}, [&] { return ++runs; });
  EXPECT_EQ(no_key.error(), errc::key_invalid);
  EXPECT_EQ(no_key.layer_name(), "db");
  EXPECT_EQ(runs, 0);
  // Every layer was released: the same request id now runs.
  auto ok = guard.execute({"req-1", token(), "order-1", "alice", "p"}, [&] { return ++runs; });
  EXPECT_TRUE(ok.executed()) << ok.message();
}

TEST_F(Fixture, SameKeyOtherPayloadIsAMismatchAtTheFirstLayerThatKnowsIt) {
  auto guard = make();
  const std::string t = token();
  ASSERT_TRUE(guard.execute({"req-1", t, "order-1", "alice", "a"}, [] { return 1; }));
  auto mismatch = guard.execute({"req-1", t, "order-1", "alice", "b"}, [] { return 2; });
  EXPECT_EQ(mismatch.error(), errc::payload_mismatch);
  EXPECT_EQ(mismatch.layer_name(), "gateway");
  auto deep = guard.execute({"req-9", token(), "order-1", "alice", "b"}, [] { return 2; });
  EXPECT_EQ(deep.error(), errc::payload_mismatch);
  EXPECT_EQ(deep.layer_name(), "db");
}

TEST_F(Fixture, PrincipalsNeverShareAnswers) {
  auto guard = make();
  auto a = guard.execute({"req-1", token(), "order-1", "alice", "p"}, [] { return 1; });
  auto b = guard.execute({"req-1", token(), "order-1", "bob", "p"}, [] { return 2; });
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(b.executed());
  EXPECT_EQ(b.value(), 2);
}

// A token one principal consumed never replays to another who presents it, with the same
// payload and keys of its own: to the token layer that is another payload (token_invalid), and
// nothing runs.
TEST_F(Fixture, AConsumedTokenNeverReplaysToAnotherPrincipal) {
  auto guard = make();
  const std::string t = token();
  int runs = 0;
  ASSERT_TRUE(guard.execute({"req-1", t, "order-1", "alice", "p"}, [&] { return ++runs; }));
  auto bob = guard.execute({"req-2", t, "order-2", "bob", "p"}, [&] { return ++runs; });
  EXPECT_EQ(bob.error(), errc::token_invalid) << bob.message();  // used with another payload
  EXPECT_EQ(bob.layer_name(), "token");
  auto alice = guard.execute({"req-3", t, "order-1", "alice", "p"}, [&] { return ++runs; });
  ASSERT_TRUE(alice.has_value()) << alice.message();
  EXPECT_TRUE(alice.replayed());
  EXPECT_EQ(alice.layer_name(), "token");
  EXPECT_EQ(runs, 1);
}

TEST_F(Fixture, HandlerThrowsAbortsInnermostFirstAndTheRetryRuns) {
  auto guard = make();
  const std::string t = token();
  const LayeredRequest req{"req-1", t, "order-1", "alice", "p"};
  EXPECT_THROW((void)guard.execute(req, []() -> int { throw std::runtime_error("card declined"); }),
               std::runtime_error);
  EXPECT_EQ(journal, (std::vector<std::string>{"db:abort", "token:abort", "gateway:abort"}));
  auto retry = guard.execute(req, [] { return 7; });
  ASSERT_TRUE(retry.has_value()) << retry.message();
  EXPECT_TRUE(retry.executed());
}

TEST_F(Fixture, InProgressAtTheGatewayStopsTheDuplicate) {
  auto guard = make();
  const std::string t = token();
  const LayeredRequest req{"req-1", t, "order-1", "alice", "p"};
  std::atomic<int> runs{0};
  auto first = guard.execute(req, [&] {
    auto dup = guard.execute(req, [&] { return ++runs; });
    EXPECT_EQ(dup.error(), errc::in_progress);
    EXPECT_EQ(dup.layer_name(), "gateway");
    return ++runs;
  });
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(runs.load(), 1);
}

TEST_F(Fixture, CacheDownFailsClosedByDefault) {
  auto guard = make();
  gateway.down = true;
  int runs = 0;
  auto out = guard.execute({"req-1", token(), "order-1", "alice", "p"}, [&] { return ++runs; });
  EXPECT_EQ(out.error(), errc::store_unavailable);
  EXPECT_EQ(out.layer_name(), "gateway");
  EXPECT_EQ(runs, 0);
  EXPECT_EQ(token_spy.claims.load(), 0);
}

TEST_F(Fixture, SkipCachePassesTheGatewayByButNeverTheRecord) {
  auto observer = std::make_shared<Observer>();
  auto guard = make(LayeredOptions{.on_layer_down = LayerDownPolicy::skip_cache,
                                   .policy = {.observer = observer}});
  gateway.down = true;
  int runs = 0;
  const std::string t = token();
  auto out = guard.execute({"req-1", t, "order-1", "alice", "p"}, [&] { return ++runs; });
  ASSERT_TRUE(out.has_value()) << out.message();
  EXPECT_TRUE(out.executed());
  EXPECT_EQ(out.skipped(), 1u);
  EXPECT_EQ(observer->counters().store_errors, 1u) << "a skipped layer is reported";
  EXPECT_EQ(journal, (std::vector<std::string>{"db:commit", "token:commit"}));
  // The token still dedupes while the gateway is down.
  auto again = guard.execute({"req-1", t, "order-1", "alice", "p"}, [&] { return ++runs; });
  EXPECT_EQ(again.layer_name(), "token");
  EXPECT_EQ(runs, 1);

  gateway.down = false;
  token_spy.down = true;
  auto token_down =
      guard.execute({"req-2", token(), "order-2", "alice", "p"}, [&] { return ++runs; });
  EXPECT_EQ(token_down.error(), errc::store_unavailable) << "only request_id layers are skipped";
  token_spy.down = false;
  db.down = true;
  auto db_down = guard.execute({"req-3", token(), "order-3", "alice", "p"}, [&] { return ++runs; });
  EXPECT_EQ(db_down.error(), errc::store_unavailable);
  EXPECT_EQ(db_down.layer_name(), "db");
  EXPECT_EQ(runs, 1);
}

TEST_F(Fixture, RecordCommitFailureLeavesNoCacheAnswering) {
  MemoryStore inner;
  struct FailingCommit {
    MemoryStore& s;
    Result<Claim> claim(const ClaimRequest& r) { return s.claim(r); }
    Status commit(const Ticket&, const Completion&) {
      return Status(errc::store_unavailable, "commit fails");
    }
    Status abort(const Ticket& t) { return s.abort(t); }
    Status extend(const Ticket& t, std::chrono::milliseconds l) { return s.extend(t, l); }
  } failing{inner};
  LayeredGuard guard(LayeredOptions{.policy = {.commit_retry = {.attempts = 2, .backoff = 0ms}}},
                     RequestIdLayer(cache), RecordLayer(failing, LayerSettings{.scope = "pay"}));
  int runs = 0;
  auto out = guard.execute({"req-1", "", "order-1", "alice", "p"}, [&] { return ++runs; });
  ASSERT_TRUE(out.has_value());
  EXPECT_FALSE(out.recorded());
  EXPECT_EQ(out.commit_error(), errc::store_unavailable);
  // The gateway was aborted, not filled: the repeat passes it and meets the record, still held
  // by the unrecorded holder until its lease runs out.
  auto again = guard.execute({"req-1", "", "order-1", "alice", "p"}, [&] { return ++runs; });
  EXPECT_EQ(again.error(), errc::in_progress);
  EXPECT_EQ(again.layer_name(), "record");
  EXPECT_EQ(runs, 1);
}

// The record's commit lands and its answer is lost: the retry finds its own commit, so the
// value is recorded, the outer layers are committed too, and the repeat replays.
TEST_F(Fixture, RecordCommitWhoseReplyIsLostIsRecordedAndFillsTheGateway) {
  testing::FlakyStore flaky;
  flaky.lost_commit_replies = 1;
  LayeredGuard guard(LayeredOptions{.policy = {.commit_retry = {.attempts = 3, .backoff = 0ms}}},
                     RequestIdLayer(cache), RecordLayer(flaky, LayerSettings{.scope = "pay"}));
  int runs = 0;
  auto out = guard.execute({"req-1", "", "order-1", "alice", "p"}, [&] { return ++runs; });
  ASSERT_TRUE(out.has_value()) << out.message();
  EXPECT_TRUE(out.recorded()) << out.commit_failure().describe();
  EXPECT_FALSE(out.commit_error());
  EXPECT_EQ(flaky.commit_calls.load(), 2);
  auto again = guard.execute({"req-1", "", "order-1", "alice", "p"}, [&] { return ++runs; });
  ASSERT_TRUE(again.has_value()) << again.message();
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(again.layer_name(), "request_id");
  EXPECT_EQ(again.value(), 1);
  EXPECT_EQ(runs, 1);
}

TEST_F(Fixture, TheClassicAliasAndVoidHandlers) {
  ThreeTierGuard<MemoryRequestIdCache, MemoryTokenStore, MemoryStore> guard{
      RequestIdLayer{cache}, TokenLayer{tokens},
      RecordLayer{records, LayerSettings{.scope = "orders"}}};
  int runs = 0;
  const std::string t = token();
  const LayeredRequest req{"r", t, "o", "alice", ""};
  auto out = guard.execute(req, [&] { ++runs; });
  EXPECT_TRUE(out.executed()) << out.message();
  auto again = guard.execute(req, [&] { ++runs; });
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(again.layer_name(), "request_id");
  EXPECT_EQ(runs, 1);
  // The cache's own execute() shares the layer's entries.
  auto direct = cache.execute(Key{"r", "alice"}, [] {});
  EXPECT_TRUE(direct.replayed());
}

// A request-ID or token layer keys its entries under its store's scope: settings naming another
// scope would split the layer's entries from the store's own execute(), so they are refused.
TEST(LayerScope, SettingsWithAnotherScopeThanTheStoresAreRefused) {
  MemoryRequestIdCache cache{MemoryRequestIdCacheOptions{.guard = {.scope = "gateway"}}};
  MemoryTokenStore tokens{MemoryTokenStoreOptions{.guard = {.scope = "checkout"}}};
  auto message_of = [](auto make) -> std::string {
    try {
      make();
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(no exception)";
  };
  const std::string cache_error = message_of(
      [&] { (void)RequestIdLayer(cache, LayerSettings{.name = "gw", .scope = "gateway.v2"}); });
  EXPECT_NE(cache_error.find("\"gateway.v2\""), std::string::npos) << cache_error;
  EXPECT_NE(cache_error.find("\"gateway\""), std::string::npos) << cache_error;
  EXPECT_NE(cache_error.find("'gw'"), std::string::npos) << cache_error;
  const std::string token_error =
      message_of([&] { (void)TokenLayer(tokens, LayerSettings{.scope = "token"}); });
  EXPECT_NE(token_error.find("\"token\""), std::string::npos) << token_error;
  EXPECT_NE(token_error.find("\"checkout\""), std::string::npos) << token_error;
  // The store's own scope, spelled out, is accepted.
  EXPECT_NO_THROW((void)RequestIdLayer(cache, LayerSettings{.scope = "gateway"}));
  EXPECT_NO_THROW((void)TokenLayer(tokens, LayerSettings{.scope = "checkout"}));
}

TEST(LayerScope, SettingsWithoutAScopeTakeTheStoresSoLayerAndStoreShareEntries) {
  MemoryRequestIdCache cache{MemoryRequestIdCacheOptions{.guard = {.scope = "gateway"}}};
  MemoryTokenStore tokens{MemoryTokenStoreOptions{.guard = {.scope = "checkout"}}};
  MemoryStore records;
  ThreeTierGuard<MemoryRequestIdCache, MemoryTokenStore, MemoryStore> guard{
      RequestIdLayer(cache, LayerSettings{.name = "gw", .ttl = 10min}),
      TokenLayer(tokens, LayerSettings{.name = "tk"}),
      RecordLayer(records, LayerSettings{.scope = "pay"})};
  const std::string t = tokens.issue(1min).value();
  // No principal: the token store's own execute() has none, and a token layer binds its
  // fingerprint to the request's (AConsumedTokenNeverReplaysToAnotherPrincipal).
  ASSERT_TRUE(guard.execute({"req-1", t, "order-1", "", "p"}, [] { return 7; }));
  auto by_cache = cache.execute(Key{"req-1"}, "p", [] { return -1; });
  ASSERT_TRUE(by_cache) << by_cache.message();
  EXPECT_TRUE(by_cache.replayed());
  EXPECT_EQ(by_cache.value(), 7);
  auto by_token = tokens.execute(t, "p", [] { return -1; });
  ASSERT_TRUE(by_token) << by_token.message();
  EXPECT_TRUE(by_token.replayed());
  EXPECT_EQ(by_token.value(), 7);
}

TEST(LayeredGuardRace, EightThreadsRunFnOnceAndAllSeeItsResult) {
  MemoryRequestIdCache cache;
  MemoryTokenStore tokens;
  MemoryStore records;
  ThreeTierGuard<MemoryRequestIdCache, MemoryTokenStore, MemoryStore> guard{
      RequestIdLayer{cache}, TokenLayer{tokens},
      RecordLayer{records, LayerSettings{.scope = "pay"}}};
  for (int round = 0; round < 50; ++round) {
    const std::string t = tokens.issue(1min).value();
    const std::string key = "order-" + std::to_string(round);
    std::atomic<int> runs{0};
    std::atomic<int> answered{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i) {
      threads.emplace_back([&, i] {
        // Each thread retries its own request id while the first holder runs.
        const std::string rid = "rid-" + std::to_string(round) + "-" + std::to_string(i % 3);
        for (;;) {
          auto out = guard.execute({rid, t, key, "alice", "p"}, [&] {
            std::this_thread::sleep_for(std::chrono::microseconds(200));
            return runs.fetch_add(1) + 1000;
          });
          if (out.error() == errc::in_progress) {
            std::this_thread::yield();
            continue;
          }
          ASSERT_TRUE(out.has_value()) << out.message();
          EXPECT_EQ(out.value(), 1000);
          answered.fetch_add(1);
          return;
        }
      });
    }
    for (auto& th : threads) th.join();
    ASSERT_EQ(runs.load(), 1) << "round " << round;
    ASSERT_EQ(answered.load(), 8);
  }
}

}  // namespace
}  // namespace idem
