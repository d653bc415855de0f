#pragma once
// The fixture of the cases on the test cluster (IDEM_TEST_REDIS_CLUSTER_SEEDS), blocking and
// asynchronous: skipped without a cluster, failed unless it is healthy, then a cluster client and
// a key prefix no other case uses.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "redis/redis_cluster_support.hpp"
#include "redis/redis_test_support.hpp"

namespace idem::testing {

class ClusterFixture : public ::testing::Test {
 protected:
  /// From SetUp(); `with_replicas`: the replicas must be in sync too. Then ready() says whether
  /// the case may go on.
  void set_up_cluster(bool with_replicas, const char* stem) {
    if (cluster_seeds() == nullptr) {
      GTEST_SKIP() << "IDEM_TEST_REDIS_CLUSTER_SEEDS is not set; scripts/test starts a cluster";
    }
    ASSERT_TRUE(wait_cluster_ok(std::chrono::seconds{20}, with_replicas))
        << "the cluster is not healthy:\n"
        << cluster_report();
    client_ = connect_cluster(cluster_options());
    ASSERT_NE(client_, nullptr);
    prefix_ = unique_prefix(stem);
  }
  static bool ready() { return !IsSkipped() && !HasFatalFailure(); }

  std::shared_ptr<redis::Client> client_;
  std::string prefix_;
};

/// A key whose record's slot holds no other key, so that a migration of it can end by decree:
/// the first id "moving-<i>" whose slot (`slot_of(id)`) is empty, and the slot's owner.
struct KeyInAnEmptySlot {
  std::string id;
  int slot = 0;
  ClusterNode source;
};

template <class SlotOf>
KeyInAnEmptySlot key_in_an_empty_slot(SlotOf slot_of) {
  KeyInAnEmptySlot found;
  for (int i = 0; found.source.id.empty(); ++i) {
    found.id = "moving-" + std::to_string(i);
    found.slot = slot_of(found.id);
    const ClusterNode owner = owner_of(found.slot);
    if (redis_integer(*node_client(owner.address),
                      {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(found.slot)}) == 0) {
      found.source = owner;
    }
  }
  return found;
}

}  // namespace idem::testing
