// The token store cases on MemoryTokenStore, its time driven by a ManualClock.

#include <memory>

#include "idem/memory/token_store.hpp"
#include "idem/testing/token_store_conformance.hpp"
#include "stores/manual_clock_traits.hpp"

namespace idem::testing {

template <>
struct TokenStoreTraits<MemoryTokenStore>
    : ManualClockTraits<MemoryTokenStore, MemoryTokenStoreOptions> {};

IDEM_TOKEN_STORE_CONFORMANCE(Memory, MemoryTokenStore);

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
