// The token store cases on MemoryTokenStore, its time driven by a ManualClock.

#include <memory>

#include "idem/memory/token_store.hpp"
#include "stores/token_store_suite.hpp"

namespace idem::testing {

template <>
struct TokenStoreTraits<MemoryTokenStore> {
  static constexpr std::chrono::milliseconds lease{std::chrono::seconds{30}};

  static std::unique_ptr<MemoryTokenStore> make(Options guard) {
    clock() = std::make_shared<ManualClock>();
    guard.clock = clock();
    return std::make_unique<MemoryTokenStore>(
        MemoryTokenStoreOptions{.guard = std::move(guard), .clock = clock()});
  }
  static void advance(MemoryTokenStore&, std::chrono::milliseconds d) { clock()->advance(d); }
  static std::shared_ptr<ManualClock>& clock() {
    static std::shared_ptr<ManualClock> c;
    return c;
  }
};

INSTANTIATE_TYPED_TEST_SUITE_P(Memory, TokenStoreSuite, ::testing::Types<MemoryTokenStore>);

TEST(MemoryTokenStoreTest, PurgeRemovesExpiredTokens) {
  auto clock = std::make_shared<ManualClock>();
  MemoryTokenStore store{MemoryTokenStoreOptions{.clock = clock}};
  ASSERT_TRUE(store.issue(std::chrono::seconds{1}));
  ASSERT_TRUE(store.issue(std::chrono::seconds{10}));
  EXPECT_EQ(store.size(), 2u);
  clock->advance(std::chrono::seconds{2});
  EXPECT_EQ(store.purge_expired(), 1u);
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.stats().store, "memory");
  EXPECT_EQ(store.stats().records, 1u);
}

}  // namespace idem::testing
