// The request-ID cache cases on MemoryRequestIdCache, plus its bound and eviction count.

#include <memory>

#include "idem/memory/request_id_cache.hpp"
#include "idem/testing/request_id_cache_conformance.hpp"
#include "stores/manual_clock_traits.hpp"

namespace idem::testing {

template <>
struct RequestIdCacheTraits<MemoryRequestIdCache>
    : ManualClockTraits<MemoryRequestIdCache, MemoryRequestIdCacheOptions> {};

IDEM_REQUEST_ID_CACHE_CONFORMANCE(Memory, MemoryRequestIdCache);

TEST(MemoryRequestIdCacheTest, BoundedWithCountedEviction) {
  MemoryRequestIdCache cache{MemoryRequestIdCacheOptions{.capacity = 8, .shards = 1}};
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(cache.execute(Key{std::to_string(i)}, [i] { return i; }));
  }
  EXPECT_EQ(cache.size(), 8u);
  EXPECT_EQ(cache.evictions(), 12u);
  const StoreStats stats = cache.stats();
  EXPECT_EQ(stats.store, "memory");
  EXPECT_EQ(stats.records, 8u);
  EXPECT_EQ(stats.evictions, 12u);
  // The newest answers stay; the oldest were evicted and run again.
  EXPECT_TRUE(cache.execute(Key{"19"}, [] { return -1; }).replayed());
  EXPECT_TRUE(cache.execute(Key{"0"}, [] { return -1; }).executed());
}

}  // namespace idem::testing
