// The record-store conformance kit on CachedStore<MemoryStore>: the cache in front must answer
// every case exactly as the store alone does. Both read one ManualClock.

#include <memory>

#include "idem/admin/cached_admin.hpp"
#include "idem/cached_store.hpp"
#include "idem/idem.hpp"
#include "idem/memory/admin.hpp"
#include "idem/testing/record_store_conformance.hpp"
#include "stores/manual_clock_traits.hpp"
#ifdef IDEM_TEST_WITH_ASIO
#include "idem/testing/async_face.hpp"
#endif

namespace idem::testing {

using CachedMemory = CachedStore<MemoryStore>;

template <>
struct StoreTraits<CachedMemory> : ManualTime<CachedMemory> {
  static std::unique_ptr<CachedMemory> make() {
    const std::shared_ptr<ManualClock> c = fresh_clock();
    return std::make_unique<CachedMemory>(CachedStoreOptions{.shards = 4, .clock = c},
                                          MemoryStoreOptions{.shards = 8, .clock = c});
  }
  static std::unique_ptr<admin::Admin> admin(CachedMemory& store) {
    return admin::cached_admin(store, std::make_unique<admin::MemoryAdmin>(store.inner()));
  }
#ifdef IDEM_TEST_WITH_ASIO
  using async_face = AsyncFace<CachedMemory>;  // the asynchronous guard, over an ImmediateStore
#endif
};

}  // namespace idem::testing

IDEM_RECORD_STORE_CONFORMANCE(CachedMemory, idem::testing::CachedMemory);
