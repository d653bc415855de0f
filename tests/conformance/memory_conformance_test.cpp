// The record-store conformance kit on MemoryStore, its time driven by a ManualClock, through every
// face: the asynchronous guard's too, with the store as an ImmediateStore.

#include <memory>

#include "idem/idem.hpp"
#include "idem/memory/admin.hpp"
#include "idem/testing/record_store_conformance.hpp"
#ifdef IDEM_TEST_WITH_ASIO
#include "idem/testing/async_face.hpp"
#endif

namespace idem::testing {

template <>
struct StoreTraits<MemoryStore> {
  static constexpr std::chrono::milliseconds lease{std::chrono::seconds{30}};

  static std::unique_ptr<MemoryStore> make() {
    clock() = std::make_shared<ManualClock>();
    return std::make_unique<MemoryStore>(MemoryStoreOptions{.shards = 8, .clock = clock()});
  }
  static void advance(MemoryStore&, std::chrono::milliseconds d) { clock()->advance(d); }
  static std::shared_ptr<Clock> clock(MemoryStore&) { return clock(); }
  static std::unique_ptr<admin::Admin> admin(MemoryStore& store) {
    return std::make_unique<admin::MemoryAdmin>(store);
  }
#ifdef IDEM_TEST_WITH_ASIO
  using async_face = AsyncFace<MemoryStore>;  // the asynchronous guard, over an ImmediateStore
#endif

  static std::shared_ptr<ManualClock>& clock() {
    static std::shared_ptr<ManualClock> c;
    return c;
  }
};

}  // namespace idem::testing

IDEM_RECORD_STORE_CONFORMANCE(Memory, idem::MemoryStore);
