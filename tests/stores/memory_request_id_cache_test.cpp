// The request-ID cache cases on MemoryRequestIdCache, plus its bound and eviction count.

#include <memory>

#include "idem/memory/request_id_cache.hpp"
#include "stores/request_id_cache_suite.hpp"

namespace idem::testing {

template <>
struct RequestIdCacheTraits<MemoryRequestIdCache> {
  static constexpr std::chrono::milliseconds lease{std::chrono::seconds{30}};

  static std::unique_ptr<MemoryRequestIdCache> make(Options guard) {
    clock() = std::make_shared<ManualClock>();
    guard.clock = clock();
    return std::make_unique<MemoryRequestIdCache>(
        MemoryRequestIdCacheOptions{.guard = std::move(guard), .clock = clock()});
  }
  static void advance(MemoryRequestIdCache&, std::chrono::milliseconds d) { clock()->advance(d); }
  static std::shared_ptr<ManualClock>& clock() {
    static std::shared_ptr<ManualClock> c;
    return c;
  }
};

INSTANTIATE_TYPED_TEST_SUITE_P(Memory, RequestIdCacheSuite, ::testing::Types<MemoryRequestIdCache>);

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
