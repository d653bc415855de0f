// The record-store conformance suite on MemoryStore, its time driven by a ManualClock.

#include <memory>

#include "conformance/record_store_suite.hpp"

namespace idem::testing {

template <>
struct StoreTraits<MemoryStore> {
  static constexpr std::chrono::milliseconds lease{std::chrono::seconds{30}};

  static std::unique_ptr<MemoryStore> make() {
    clock() = std::make_shared<ManualClock>();
    return std::make_unique<MemoryStore>(MemoryStoreOptions{.shards = 8, .clock = clock()});
  }
  static void advance(MemoryStore&, std::chrono::milliseconds d) { clock()->advance(d); }

  static std::shared_ptr<ManualClock>& clock() {
    static std::shared_ptr<ManualClock> c;
    return c;
  }
};

INSTANTIATE_TYPED_TEST_SUITE_P(Memory, RecordStoreConformance, ::testing::Types<MemoryStore>);

}  // namespace idem::testing
