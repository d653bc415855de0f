// The record-store conformance kit on MemoryStore, its time driven by a ManualClock, through every
// face: the asynchronous guard's too, with the store as an ImmediateStore.

#include <memory>

#include "idem/idem.hpp"
#include "idem/memory/admin.hpp"
#include "idem/testing/record_store_conformance.hpp"
#include "stores/manual_clock_traits.hpp"
#ifdef IDEM_TEST_WITH_ASIO
#include "idem/testing/async_face.hpp"
#endif

namespace idem::testing {

template <>
struct StoreTraits<MemoryStore> : ManualTime<MemoryStore> {
  static std::unique_ptr<MemoryStore> make() {
    return std::make_unique<MemoryStore>(MemoryStoreOptions{.shards = 8, .clock = fresh_clock()});
  }
  static std::unique_ptr<admin::Admin> admin(MemoryStore& store) {
    return std::make_unique<admin::MemoryAdmin>(store);
  }
#ifdef IDEM_TEST_WITH_ASIO
  using async_face = AsyncFace<MemoryStore>;  // the asynchronous guard, over an ImmediateStore
#endif
};

}  // namespace idem::testing

IDEM_RECORD_STORE_CONFORMANCE(Memory, idem::MemoryStore);
