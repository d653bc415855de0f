// VersionStore and StateMachineStore on MemoryBackend: the typed entity suite.

#include <array>
#include <future>
#include <string>

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

// The backend's fenced calls: only the claim's own ticket (its operation's key and its fence)
// commits, aborts, rewinds or extends, and only while the operation is held; an abort takes the
// operation out of the log, a commit keeps it for good.
TEST(MemoryEntityStoreTest, OnlyTheHoldersTicketEndsAnOperationAndAnAbortLeavesNoTrace) {
  detail::MemoryEntities entities(detail::EntityKind::state);
  entities.put("o", "CREATED");
  const std::array<std::string, 1> from{"CREATED"};
  const std::string op = detail::entity_op_key("orders", "o", "ePAY");
  const std::string other_op = detail::entity_op_key("orders", "o", "eSHIP");
  const detail::CasRequest pay{.op_key = op, .entity = "o", .from = from, .to = "PAID"};
  const Completion done{.status = ClaimStatus::completed, .result = "7"};

  auto first = entities.claim(pay);
  ASSERT_TRUE(first.has_value());
  ASSERT_EQ(first.value().claim.status, ClaimStatus::acquired);
  const Fence fence = first.value().claim.fence;
  for (const Ticket& stale : {Ticket{op, fence + 1}, Ticket{other_op, fence}}) {
    EXPECT_EQ(entities.commit(stale, done).error(), errc::lease_lost);
    EXPECT_EQ(entities.abort(stale).error(), errc::lease_lost);
    EXPECT_EQ(entities.rewind(stale).error(), errc::lease_lost);
    EXPECT_EQ(entities.extend(stale, std::chrono::seconds{1}).error(), errc::lease_lost);
  }
  ASSERT_TRUE(entities.extend(Ticket{op, fence}, std::chrono::seconds{1}).ok());
  ASSERT_TRUE(entities.abort(Ticket{op, fence}).ok());
  EXPECT_EQ(entities.current("o").value(), "CREATED");
  EXPECT_EQ(entities.commit(Ticket{op, fence}, done).error(), errc::lease_lost);

  // Aborted, the operation claims again as new, under a new fence.
  auto second = entities.claim(pay);
  ASSERT_TRUE(second.has_value());
  ASSERT_EQ(second.value().claim.status, ClaimStatus::acquired);
  const Fence fence2 = second.value().claim.fence;
  EXPECT_NE(fence2, fence);
  ASSERT_TRUE(entities.commit(Ticket{op, fence2}, done).ok());
  EXPECT_EQ(entities.current("o").value(), "PAID");
  EXPECT_EQ(entities.commit(Ticket{op, fence2}, done).error(), errc::lease_lost);
  EXPECT_EQ(entities.abort(Ticket{op, fence2}).error(), errc::lease_lost);

  auto replay = entities.claim(pay);
  ASSERT_TRUE(replay.has_value());
  EXPECT_EQ(replay.value().claim.status, ClaimStatus::completed);
  EXPECT_EQ(replay.value().claim.result, "7");
  EXPECT_EQ(replay.value().claim.fence, fence2);
}

// A rewound operation commits its result and leaves the entity where it was.
TEST(MemoryEntityStoreTest, ARewoundOperationCommitsWithoutMovingTheEntity) {
  detail::MemoryEntities entities(detail::EntityKind::version);
  entities.put("a", "3");
  const std::string op = detail::entity_op_key("accounts", "a", "v3");
  auto claimed =
      entities.claim(detail::CasRequest{.op_key = op, .entity = "a", .expected_version = 3});
  ASSERT_TRUE(claimed.has_value());
  ASSERT_EQ(claimed.value().claim.status, ClaimStatus::acquired);
  const Ticket ticket{op, claimed.value().claim.fence};
  ASSERT_TRUE(entities.rewind(ticket).ok());
  ASSERT_TRUE(
      entities.commit(ticket, Completion{.status = ClaimStatus::failed, .result = "x"}).ok());
  EXPECT_EQ(entities.current("a").value(), "3");
  auto replay =
      entities.claim(detail::CasRequest{.op_key = op, .entity = "a", .expected_version = 3});
  ASSERT_TRUE(replay.has_value());
  EXPECT_EQ(replay.value().claim.status, ClaimStatus::failed);
}

}  // namespace idem::testing
