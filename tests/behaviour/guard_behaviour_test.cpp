// The behaviour suite over IdempotencyGuard and LayeredGuard (one record layer, and the three
// tiers), all on the memory stores.

#include "behaviour/guard_behaviour_suite.hpp"

namespace idem::testing {
namespace {

class AdapterNames {
 public:
  template <class Adapter>
  static std::string GetName(int) {
    return Adapter::kName;
  }
};

using Adapters = ::testing::Types<GuardAdapter, LayeredAdapter, ThreeTierAdapter>;
INSTANTIATE_TYPED_TEST_SUITE_P(Memory, GuardBehaviour, Adapters, AdapterNames);

}  // namespace
}  // namespace idem::testing
