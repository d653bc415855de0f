// The two-phase API on MemoryStore, time driven by a ManualClock.

#include "two_phase/two_phase_cases.hpp"

namespace idem::testing {
namespace {

struct MemoryBackend {
  using StoreType = MemoryStore;
  static constexpr const char* kName = "memory";
  static constexpr bool kTransactional = false;

  void set_up() {}
  MemoryStore& store() { return store_; }
  std::shared_ptr<Clock> clock() { return clock_; }
  void pass(milliseconds d) { clock_->advance(d); }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  MemoryStore store_{MemoryStoreOptions{.clock = clock_}};
};

INSTANTIATE_TYPED_TEST_SUITE_P(Memory, TwoPhaseTest, MemoryBackend, BackendNames);
INSTANTIATE_TYPED_TEST_SUITE_P(Memory, TwoPhaseLeaseTest, MemoryBackend, BackendNames);

}  // namespace
}  // namespace idem::testing
