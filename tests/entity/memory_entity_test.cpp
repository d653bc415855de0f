// VersionStore and StateMachineStore on MemoryBackend: the typed entity suite.

#include <future>

#include "entity/entity_store_suite.hpp"

namespace idem::testing {

INSTANTIATE_TYPED_TEST_SUITE_P(Memory, EntityStoreTest, MemoryTarget);

TEST(MemoryEntityStoreTest, AClaimThatMayNotWaitForTheHolderAnswersInProgress) {
  StateMachineStore<TransitionTable, MemoryBackend> store{
      order_machine(), {.guard = Options{.scope = "orders", .in_progress = FailFast{}}}};
  store.put("o", "CREATED");
  std::promise<void> inside, finish;
  std::shared_future<void> finished = finish.get_future().share();
  auto holder = std::async(std::launch::async, [&] {
    return store.execute(EventKey{"o", "PAY"}, [&] {
      inside.set_value();
      finished.wait();
      return 1;
    });
  });
  inside.get_future().wait();
  auto busy = store.execute(EventKey{"o", "PAY"}, [] { return 2; });
  EXPECT_EQ(busy.error(), errc::in_progress);
  finish.set_value();
  ASSERT_TRUE(holder.get().has_value());
  auto replay = store.execute(EventKey{"o", "PAY"}, [] { return 2; });
  ASSERT_TRUE(replay.has_value()) << replay.message();
  EXPECT_TRUE(replay.replayed());
  EXPECT_EQ(replay.value(), 1);
}

}  // namespace idem::testing
