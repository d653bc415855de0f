#pragma once
// Tenants apart, on every store the guard and the admin reach: one principal never reads,
// replays, releases or forgets another's record. The keys collide in every way that matters:
// the same id under principals that are prefixes of one another, a principal and id that
// concatenate to another pair's (or to an id alone), the empty principal, the bytes of a length
// prefix, separators, NUL, Redis hash tags and the pattern characters of SCAN MATCH and SQL LIKE.
//
// One list of cases (TYPED_TEST_SUITE_P), instantiated per store with a kit:
//
//   struct Kit {
//     static std::optional<std::string> unavailable();  // why the store is out of reach (skip)
//     Kit();              // a store and its admin, apart from every other test's records; throws
//     StoreType& store(); // when the store is named but does not answer (the case fails)
//     admin::Admin& admin();
//   };
//
// and INSTANTIATE_TYPED_TEST_SUITE_P(Name, TenantsApart, ::testing::Types<Kit...>).

#include <gtest/gtest.h>

#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "idem/admin.hpp"
#include "idem/guard.hpp"

namespace idem::testing {

/// A key whose bytes the list keeps (Key only views them).
struct TenantKey {
  std::string id;
  std::string principal;
  Key key() const { return Key{std::string_view(id), std::string_view(principal)}; }
};

inline std::string tenant_key_name(const TenantKey& k) {
  std::string out;
  for (const std::string* part : {&k.principal, &k.id}) {
    for (const char c : *part) {
      if (c >= ' ' && c <= '~') {
        out += c;
      } else {
        static constexpr std::string_view kHex = "0123456789abcdef";
        const auto byte = static_cast<unsigned char>(c);
        out += "\\x";
        out += kHex[byte >> 4U];
        out += kHex[byte & 0xfU];
      }
    }
    if (part == &k.principal) out += " / ";
  }
  return "{" + out + "}";
}

/// Keys that are all distinct, and would meet if principal and id were joined without their
/// lengths, compared by prefix, or matched as a pattern.
inline const std::vector<TenantKey>& colliding_keys() {
  using namespace std::string_literals;
  static const std::vector<TenantKey> keys = {
      {"order-1", "alice"},
      {"order-1", "alic"},             // a prefix of "alice"
      {"order-1", "alice2"},           // "alice" a prefix of it
      {"order-1", ""},                 // no principal
      {"eorder-1", "alic"},            // "alic" "eorder-1" is "alice" "order-1"
      {"aliceorder-1", ""},            // the same bytes as an id alone
      {"1", "aliceorder-"},            // the split moved
      {"order-1", "alice\0"s},         // a NUL after the principal
      {"\0order-1"s, "alice"},         // a NUL before the id
      {"\x05"s + "aliceorder-1", ""},  // the byte that prefixes "alice"'s length, in the id
      {"order-1", "\x05"s + "alice"},  // and in the principal
      {"order-1", "alice:"},           // separators
      {":order-1", "alice"},
      {"order-1", "{alice}"},  // a Redis Cluster hash tag
      {"{order-1}", "alice"},
      {"order-1", "ali%"},  // SQL LIKE patterns
      {"order-1", "ali_e"},
      {"order-*", "alice"},  // SCAN MATCH patterns
      {"order-?", "alice"},
      {"order-[1]", "alice"},
      {"order-1", "alice\\"},  // an escape character
  };
  return keys;
}

/// Keys no case writes: each would meet a key of the list under a loose comparison.
inline const std::vector<TenantKey>& stranger_keys() {
  using namespace std::string_literals;
  static const std::vector<TenantKey> keys = {
      {"order-1", "ali"},        {"order-1", "Alice"},     {"order-", "1alice"},
      {"order-1", "alice\0\0"s}, {"order-1", "ali*"},      {"order-1", "ali?"},
      {"order-1", "ali[c]e"},    {"order-1", "%"},         {"order-1", "_"},
      {"order-%", "alice"},      {"order-_", "alice"},     {"order-1", "{alic}"},
      {"order-1*", "alice"},     {"order-1", "alice\\\\"},
  };
  return keys;
}

inline constexpr std::string_view kTenantScope = "tenants";

template <class Kit>
class TenantsApart : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::optional<std::string> why = Kit::unavailable()) GTEST_SKIP() << *why;
    try {
      kit_ = std::make_unique<Kit>();
    } catch (const std::exception& e) {  // a server that is named but does not answer
      FAIL() << e.what();
    }
  }

  auto& store() { return kit_->store(); }
  admin::Admin& admin() { return kit_->admin(); }
  auto guard(std::string_view scope = kTenantScope) {
    return IdempotencyGuard{store(), Options{.scope = std::string(scope)}};
  }

  // Each key of the list runs its own handler once, with a payload of its own: a key that met
  // another's record would replay its answer or be refused as a mismatch.
  void record_every_key() {
    auto g = guard();
    const auto& keys = colliding_keys();
    for (std::size_t i = 0; i < keys.size(); ++i) {
      int runs = 0;
      auto out = g.execute(keys[i].key(), payload_of(i), [&] {
        ++runs;
        return static_cast<int>(i);
      });
      ASSERT_TRUE(out) << tenant_key_name(keys[i]) << ": " << out.message();
      EXPECT_EQ(out.value(), static_cast<int>(i)) << tenant_key_name(keys[i]);
      EXPECT_EQ(runs, 1) << tenant_key_name(keys[i]) << " met another principal's record";
    }
  }

  // Every key of the list but `except` replays its own answer.
  void expect_every_key_replays_its_own(std::optional<std::size_t> except = std::nullopt) {
    auto g = guard();
    const auto& keys = colliding_keys();
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (except == i) continue;
      auto again = g.execute(keys[i].key(), payload_of(i), [] { return -1; });
      ASSERT_TRUE(again) << tenant_key_name(keys[i]) << ": " << again.message();
      EXPECT_TRUE(again.replayed()) << tenant_key_name(keys[i]);
      EXPECT_EQ(again.value(), static_cast<int>(i)) << tenant_key_name(keys[i]);
    }
  }

  static std::string payload_of(std::size_t i) { return "payload-" + std::to_string(i); }

 private:
  std::unique_ptr<Kit> kit_;
};

TYPED_TEST_SUITE_P(TenantsApart);

TYPED_TEST_P(TenantsApart, EachCollidingKeyRunsOnceAndReplaysOnlyItsOwnAnswer) {
  ASSERT_NO_FATAL_FAILURE(this->record_every_key());
  this->expect_every_key_replays_its_own();
}

TYPED_TEST_P(TenantsApart, TheSameKeyUnderAnotherScopeIsAnotherRecord) {
  ASSERT_NO_FATAL_FAILURE(this->record_every_key());
  // "tenant" is a prefix of the list's scope, "tenants" "alice" of the bytes of this one.
  for (const std::string_view scope : {"tenant", "tenantsalice", "tenants.other"}) {
    auto other = this->guard(scope);
    int runs = 0;
    auto out = other.execute(colliding_keys()[0].key(), "another payload", [&] { return ++runs; });
    ASSERT_TRUE(out) << scope << ": " << out.message();
    EXPECT_EQ(runs, 1) << scope;
  }
  this->expect_every_key_replays_its_own();
}

TYPED_TEST_P(TenantsApart, TheAdminSeesEachKeyAsItsOwnRecord) {
  ASSERT_NO_FATAL_FAILURE(this->record_every_key());
  const auto& keys = colliding_keys();
  for (const TenantKey& k : keys) {
    const auto seen = this->admin().inspect(kTenantScope, k.key());
    ASSERT_TRUE(seen) << tenant_key_name(k) << ": " << seen.failure().describe();
    ASSERT_TRUE(seen.value()) << tenant_key_name(k);
    EXPECT_EQ(seen.value()->principal, k.principal) << tenant_key_name(k);
    EXPECT_EQ(seen.value()->id, k.id) << tenant_key_name(k);
    EXPECT_EQ(seen.value()->state, admin::State::completed) << tenant_key_name(k);
  }
  // A listing of the scope names each key once, with its own principal and id.
  std::multiset<std::pair<std::string, std::string>> listed;
  admin::ListRequest request{.state = admin::State::completed, .limit = 4};
  for (int page = 0; page < 100; ++page) {
    const auto got = this->admin().list(kTenantScope, request);
    ASSERT_TRUE(got) << got.failure().describe();
    for (const admin::RecordInfo& r : got->records) listed.emplace(r.principal, r.id);
    if (got->next_cursor.empty()) break;
    request.cursor = got->next_cursor;
  }
  std::multiset<std::pair<std::string, std::string>> written;
  for (const TenantKey& k : keys) written.emplace(k.principal, k.id);
  EXPECT_EQ(listed, written);
  // A scope whose name is a prefix of the list's holds none of its records.
  const auto prefix_scope =
      this->admin().list("tenant", admin::ListRequest{.state = admin::State::completed});
  ASSERT_TRUE(prefix_scope) << prefix_scope.failure().describe();
  EXPECT_TRUE(prefix_scope->records.empty());
  const auto counted = this->admin().stats(kTenantScope);
  ASSERT_TRUE(counted) << counted.failure().describe();
  EXPECT_EQ(counted->completed, keys.size());
}

TYPED_TEST_P(TenantsApart, AStrangerFindsReleasesAndForgetsNothing) {
  ASSERT_NO_FATAL_FAILURE(this->record_every_key());
  for (const TenantKey& k : stranger_keys()) {
    const auto none = this->admin().inspect(kTenantScope, k.key());
    ASSERT_TRUE(none) << tenant_key_name(k) << ": " << none.failure().describe();
    EXPECT_FALSE(none.value()) << tenant_key_name(k) << " found " << none.value()->principal;
    const auto released = this->admin().release(kTenantScope, k.key());
    ASSERT_TRUE(released) << tenant_key_name(k) << ": " << released.failure().describe();
    EXPECT_FALSE(released->changed) << tenant_key_name(k);
    const auto forgotten = this->admin().forget(kTenantScope, k.key());
    ASSERT_TRUE(forgotten) << tenant_key_name(k) << ": " << forgotten.failure().describe();
    EXPECT_FALSE(forgotten->changed) << tenant_key_name(k);
  }
  this->expect_every_key_replays_its_own();
}

TYPED_TEST_P(TenantsApart, ForgettingOnePrincipalsRecordKeepsEveryOther) {
  ASSERT_NO_FATAL_FAILURE(this->record_every_key());
  const auto& keys = colliding_keys();
  for (const std::size_t victim : {std::size_t{0}, std::size_t{3}, keys.size() - 1}) {
    const auto forgotten = this->admin().forget(kTenantScope, keys[victim].key());
    ASSERT_TRUE(forgotten) << forgotten.failure().describe();
    EXPECT_TRUE(forgotten->changed);
    ASSERT_TRUE(forgotten->before);
    EXPECT_EQ(forgotten->before->principal, keys[victim].principal);
    EXPECT_EQ(forgotten->before->id, keys[victim].id);
    this->expect_every_key_replays_its_own(victim);
    // The forgotten key runs again, with any payload; the others still replay.
    auto g = this->guard();
    int reruns = 0;
    auto rerun = g.execute(keys[victim].key(), this->payload_of(victim), [&] {
      ++reruns;
      return static_cast<int>(victim);
    });
    ASSERT_TRUE(rerun) << rerun.message();
    EXPECT_EQ(reruns, 1) << tenant_key_name(keys[victim]);
  }
  this->expect_every_key_replays_its_own();
}

TYPED_TEST_P(TenantsApart, AHoldIsItsPrincipalsAlone) {
  auto g = this->guard();
  const Key holder{"held", "alice"};
  auto held = g.template begin<int>(holder, "payload");
  ASSERT_TRUE(held.acquired()) << held.outcome().message();
  // The same id under the other principals is not in progress: each runs its own handler.
  for (const std::string_view principal : {"alic", "alice2", "", "alice:"}) {
    auto other = g.execute(Key{"held", principal}, "another payload", [] { return 5; });
    ASSERT_TRUE(other) << principal << ": " << other.message();
    EXPECT_EQ(other.value(), 5);
    EXPECT_FALSE(other.replayed());
  }
  // Releasing a key that is not the holder's leaves the hold.
  for (const std::string_view principal : {"ali", "alic", "alice2", "alice*"}) {
    const auto not_theirs = this->admin().release(kTenantScope, Key{"held", principal});
    ASSERT_TRUE(not_theirs) << not_theirs.failure().describe();
    EXPECT_FALSE(not_theirs->changed) << principal;
  }
  const auto still = this->admin().inspect(kTenantScope, holder);
  ASSERT_TRUE(still && still.value()) << (still ? "no record" : still.failure().describe());
  EXPECT_EQ(still.value()->state, admin::State::in_progress);
  const auto committed = held.commit(1);
  ASSERT_TRUE(committed) << committed.message();
  auto replay = g.execute(holder, "payload", [] { return -1; });
  ASSERT_TRUE(replay) << replay.message();
  EXPECT_EQ(replay.value(), 1);
}

TYPED_TEST_P(TenantsApart, ReleasingOnePrincipalsHoldLeavesTheOthers) {
  auto g = this->guard();
  auto alices = g.template begin<int>(Key{"held", "alice"}, "payload");
  auto alics = g.template begin<int>(Key{"held", "alic"}, "payload");
  ASSERT_TRUE(alices.acquired()) << alices.outcome().message();
  ASSERT_TRUE(alics.acquired()) << alics.outcome().message();
  const auto released = this->admin().release(kTenantScope, Key{"held", "alice"});
  ASSERT_TRUE(released) << released.failure().describe();
  EXPECT_TRUE(released->changed);
  ASSERT_TRUE(released->before);
  EXPECT_EQ(released->before->principal, "alice");
  // The released holder has lost its key; the other holder keeps its own.
  const auto lost = alices.commit(1);
  EXPECT_FALSE(lost);
  EXPECT_EQ(lost.error(), make_error_code(errc::lease_lost)) << lost.message();
  const auto kept = alics.commit(2);
  ASSERT_TRUE(kept) << kept.message();
  auto theirs = g.execute(Key{"held", "alic"}, "payload", [] { return -1; });
  ASSERT_TRUE(theirs) << theirs.message();
  EXPECT_EQ(theirs.value(), 2);
  int reruns = 0;
  auto again = g.execute(Key{"held", "alice"}, "payload", [&] { return 10 + ++reruns; });
  ASSERT_TRUE(again) << again.message();
  EXPECT_EQ(reruns, 1);
}

REGISTER_TYPED_TEST_SUITE_P(TenantsApart, EachCollidingKeyRunsOnceAndReplaysOnlyItsOwnAnswer,
                            TheSameKeyUnderAnotherScopeIsAnotherRecord,
                            TheAdminSeesEachKeyAsItsOwnRecord,
                            AStrangerFindsReleasesAndForgetsNothing,
                            ForgettingOnePrincipalsRecordKeepsEveryOther, AHoldIsItsPrincipalsAlone,
                            ReleasingOnePrincipalsHoldLeavesTheOthers);

/// The kit's name in the tests' names ("TenantsApart/Memory.<case>" and so on).
struct TenantKitName {
  template <class Kit>
  static std::string GetName(int /*index*/) {
    return Kit::kName;
  }
};

}  // namespace idem::testing
