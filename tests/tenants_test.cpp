// Tenants apart: one principal never reads, replays, releases or forgets another's record, with
// keys chosen to collide in every way that matters: the same id and scope under two principals,
// one principal a prefix of the other, a principal and id that concatenate to another pair's, and
// the empty principal. Through the guard and through the admin, on the memory store and SQLite.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "idem/guard.hpp"
#include "idem/memory/admin.hpp"
#include "idem/memory/store.hpp"
#include "idem/sqlite/admin.hpp"
#include "idem/sqlite/store.hpp"

namespace idem::testing {
namespace {

// Keys that collide if the principal were joined to the id, or compared by prefix.
const std::vector<Key> kColliding = {Key{"order-1", "alice"},
                                     Key{"order-1", "alic"},
                                     Key{"order-1", "alice2"},
                                     Key{"order-1", ""},
                                     Key{"eorder-1", "alic"},
                                     Key{"alice"
                                         "order-1",
                                         ""},
                                     Key{"1",
                                         "alice"
                                         "order-"}};

template <class Store>
void each_principal_has_its_own_record(Store& store, admin::Admin& admin) {
  IdempotencyGuard guard{store, Options{.scope = "tenants"}};
  // Each key runs its own handler once, and replays its own answer only.
  for (std::size_t i = 0; i < kColliding.size(); ++i) {
    int runs = 0;
    auto out = guard.execute(kColliding[i], "payload", [&] {
      ++runs;
      return static_cast<int>(i);
    });
    ASSERT_TRUE(out) << out.message();
    EXPECT_EQ(out.value(), static_cast<int>(i)) << "key " << i << " got another's answer";
    EXPECT_EQ(runs, 1) << "key " << i << " replayed another principal's record";
  }
  for (std::size_t i = 0; i < kColliding.size(); ++i) {
    auto again = guard.execute(kColliding[i], "payload", [] { return -1; });
    ASSERT_TRUE(again) << again.message();
    EXPECT_EQ(again.value(), static_cast<int>(i));
    const auto seen = admin.inspect("tenants", kColliding[i]);
    ASSERT_TRUE(seen) << seen.failure().message;
    ASSERT_TRUE(seen.value());
    EXPECT_EQ(seen.value()->principal, kColliding[i].principal);
    EXPECT_EQ(seen.value()->id, kColliding[i].id);
  }
  // A principal with no record of its own under the id finds nothing, and cannot release or
  // forget the others'.
  const Key stranger{"order-1", "ali"};
  const auto none = admin.inspect("tenants", stranger);
  ASSERT_TRUE(none);
  EXPECT_FALSE(none.value());
  const auto released = admin.release("tenants", stranger);
  ASSERT_TRUE(released);
  EXPECT_FALSE(released->changed);
  const auto forgotten = admin.forget("tenants", stranger);
  ASSERT_TRUE(forgotten);
  EXPECT_FALSE(forgotten->changed);
  // Forgetting one principal's record leaves every other's.
  ASSERT_TRUE(admin.forget("tenants", kColliding[0]));
  for (std::size_t i = 1; i < kColliding.size(); ++i) {
    auto kept = guard.execute(kColliding[i], "payload", [] { return -1; });
    ASSERT_TRUE(kept);
    EXPECT_EQ(kept.value(), static_cast<int>(i)) << "key " << i << " lost its record";
  }
  int reruns = 0;
  auto rerun = guard.execute(kColliding[0], "payload", [&] { return ++reruns; });
  ASSERT_TRUE(rerun);
  EXPECT_EQ(reruns, 1);
  // A held key is held for its principal alone: the others are served meanwhile, and releasing
  // another principal's key leaves the holder's hold.
  auto held = guard.template begin<int>(Key{"held", "alice"}, "payload");
  ASSERT_TRUE(held.acquired());
  auto other = guard.execute(Key{"held", "alic"}, "payload", [] { return 5; });
  ASSERT_TRUE(other) << other.message();
  EXPECT_EQ(other.value(), 5);
  const auto not_theirs = admin.release("tenants", Key{"held", "alice2"});
  ASSERT_TRUE(not_theirs);
  EXPECT_FALSE(not_theirs->changed);
  const auto committed = held.commit(1);
  EXPECT_TRUE(committed) << committed.message();
}

TEST(Tenants, MemoryStore) {
  MemoryStore store;
  admin::MemoryAdmin admin{store};
  each_principal_has_its_own_record(store, admin);
}

TEST(Tenants, SqliteStore) {
  const std::string path = "/tmp/idem_tenants_test_" + std::to_string(::getpid()) + ".db";
  std::filesystem::remove(path);
  {
    SqliteStore store{SqliteStoreOptions{.path = path}};
    const auto admin = admin::sqlite_admin({.path = path});
    each_principal_has_its_own_record(store, *admin);
  }
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}

}  // namespace
}  // namespace idem::testing
