// The record-store conformance kit on CachedStore<MemoryStore>: the cache in front must answer
// every case exactly as the store alone does. Both read one ManualClock.

#include <memory>

#include "idem/admin/cached_admin.hpp"
#include "idem/cached_store.hpp"
#include "idem/idem.hpp"
#include "idem/memory/admin.hpp"
#include "idem/testing/record_store_conformance.hpp"
#ifdef IDEM_TEST_WITH_ASIO
#include "idem/testing/async_face.hpp"
#endif

namespace idem::testing {

using CachedMemory = CachedStore<MemoryStore>;

template <>
struct StoreTraits<CachedMemory> {
  static constexpr std::chrono::milliseconds lease{std::chrono::seconds{30}};

  static std::unique_ptr<CachedMemory> make() {
    clock() = std::make_shared<ManualClock>();
    return std::make_unique<CachedMemory>(CachedStoreOptions{.shards = 4, .clock = clock()},
                                          MemoryStoreOptions{.shards = 8, .clock = clock()});
  }
  static void advance(CachedMemory&, std::chrono::milliseconds d) { clock()->advance(d); }
  static std::shared_ptr<Clock> clock(CachedMemory&) { return clock(); }
  static std::unique_ptr<admin::Admin> admin(CachedMemory& store) {
    return admin::cached_admin(store, std::make_unique<admin::MemoryAdmin>(store.inner()));
  }
#ifdef IDEM_TEST_WITH_ASIO
  using async_face = AsyncFace<CachedMemory>;  // the asynchronous guard, over an ImmediateStore
#endif

  static std::shared_ptr<ManualClock>& clock() {
    static std::shared_ptr<ManualClock> c;
    return c;
  }
};

}  // namespace idem::testing

IDEM_RECORD_STORE_CONFORMANCE(CachedMemory, idem::testing::CachedMemory);
