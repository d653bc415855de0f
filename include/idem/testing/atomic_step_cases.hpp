#pragma once
// Stores whose atomic steps write through a transaction of the store's own
// (idem::AtomicStepStore), with traits that can write a row there and count the rows that
// committed (WritesInTransactions): a step that fails takes exactly its own writes with it,
// whatever the handler does next (catch it and go on, nest steps, fail with a remembered
// failure), and a step's writes remain exactly when its record does.

#include <gtest/gtest.h>

#include <concepts>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include "idem/idem.hpp"
#include "idem/steps.hpp"
#include "idem/testing/detail/conformance_case.hpp"
#include "idem/testing/store_traits.hpp"

namespace idem::testing {

/// StoreTraits<S> can write through the store's transaction and read what committed:
///
///   static void write(S& store, const NativeTransaction& tx, std::string_view tag);
///       Inserts `tag` through tx into a table whose tags are unique, so that writing a tag a
///       second time in the same transaction is a statement the database refuses (it throws).
///   static std::size_t written(S& store, std::string_view tag);
///       How many rows tagged `tag` have committed (0 or 1), read outside any claim.
template <class S>
concept WritesInTransactions = requires(S& store, const NativeTransaction& tx,
                                        std::string_view tag) {
  StoreTraits<S>::write(store, tx, tag);
  { StoreTraits<S>::written(store, tag) } -> std::convertible_to<std::size_t>;
};

namespace conformance {

/// Writes `tag` through the transaction `ctx` runs in (an atomic step's).
template <class S>
void write_tag(S& store, Context& ctx, std::string_view tag) {
  StoreTraits<S>::write(store, ctx.native_transaction(), tag);
}

template <class S>
std::size_t written_tags(S& store, std::string_view tag) {
  return StoreTraits<S>::written(store, tag);
}

IDEM_TESTING_CASE(AThrowingAtomicStepLeavesNoWritesWhenTheHandlerGoesOn) {
  S& store = this->store();
  IdempotencyGuard guard{store, Options{.scope = this->key("scope")}};
  const std::string failed = this->key("failed");
  const std::string kept = this->key("kept");
  auto out = guard.execute("k", [&](Context& ctx) {
    try {
      ctx.atomic_step("fails", [&](Context& c) {
        write_tag(store, c, failed);
        throw std::runtime_error("the step failed after its write");
      });
      ADD_FAILURE() << "the throwing step returned";
    } catch (const std::runtime_error&) {
      // The handler handles it and goes on.
    }
    return ctx.atomic_step("succeeds", [&](Context& c) {
      write_tag(store, c, kept);
      return 7;
    });
  });
  ASSERT_TRUE(out.has_value()) << out.message();
  EXPECT_EQ(out.value(), 7);
  EXPECT_EQ(written_tags(store, failed), 0u) << "the failed step's write committed";
  EXPECT_EQ(written_tags(store, kept), 1u);
}

// A statement the database refuses inside a step (PostgreSQL: it aborts the transaction): the
// step fails, and the handler's transaction is still usable afterwards.
IDEM_TESTING_CASE(AStepWhoseStatementFailedLeavesTheHandlersTransactionUsable) {
  S& store = this->store();
  IdempotencyGuard guard{store, Options{.scope = this->key("scope")}};
  const std::string twice = this->key("twice");
  const std::string after = this->key("after");
  auto out = guard.execute("k", [&](Context& ctx) {
    EXPECT_ANY_THROW(ctx.atomic_step("refused", [&](Context& c) {
      write_tag(store, c, twice);
      write_tag(store, c, twice);  // refused by the database: throws out of the step
    }));
    return ctx.atomic_step("after", [&](Context& c) {
      write_tag(store, c, after);
      return std::string("done");
    });
  });
  ASSERT_TRUE(out.has_value()) << out.message();
  EXPECT_EQ(written_tags(store, twice), 0u) << "the failed step's first write committed";
  EXPECT_EQ(written_tags(store, after), 1u);
}

// A step that swallows its refused statement and returns: whether the store then saves the step
// or fails it (PostgreSQL's aborted transaction), its writes remain exactly when it succeeded,
// and the handler's transaction goes on either way.
IDEM_TESTING_CASE(AStepsWritesRemainExactlyWhenItsRecordDoes) {
  S& store = this->store();
  IdempotencyGuard guard{store, Options{.scope = this->key("scope")}};
  const std::string swallowed = this->key("swallowed");
  const std::string after = this->key("after");
  bool step_succeeded = false;
  auto out = guard.execute("k", [&](Context& ctx) {
    try {
      ctx.atomic_step("swallows", [&](Context& c) {
        write_tag(store, c, swallowed);
        try {
          write_tag(store, c, swallowed);
        } catch (...) {
          // Swallowed: the step returns as if all went well.
        }
      });
      step_succeeded = true;
    } catch (const Error&) {
      step_succeeded = false;  // the store could not save the step: it failed
    }
    ctx.atomic_step("after", [&](Context& c) { write_tag(store, c, after); });
    return 1;
  });
  ASSERT_TRUE(out.has_value()) << out.message();
  EXPECT_EQ(written_tags(store, swallowed), step_succeeded ? 1u : 0u)
      << (step_succeeded ? "the step succeeded without its write"
                         : "the failed step's write committed");
  EXPECT_EQ(written_tags(store, after), 1u);
}

IDEM_TESTING_CASE(ANestedAtomicStepIsPartOfItsOuterStep) {
  S& store = this->store();
  IdempotencyGuard guard{store, Options{.scope = this->key("scope")}};
  const std::string outer = this->key("outer");
  const std::string inner_failed = this->key("inner failed");
  const std::string inner_of_failed = this->key("inner of a failed step");
  const std::string outer_failed = this->key("outer failed");
  auto out = guard.execute("k", [&](Context& ctx) {
    // The inner step fails and the outer one handles it: only the outer's write remains.
    ctx.atomic_step("outer", [&](Context& c) {
      write_tag(store, c, outer);
      EXPECT_THROW(c.atomic_step("inner",
                                 [&](Context& i) {
                                   write_tag(store, i, inner_failed);
                                   throw std::runtime_error("inner step failed");
                                 }),
                   std::runtime_error);
    });
    // The inner step succeeds and the outer one then fails: neither write remains.
    EXPECT_THROW(ctx.atomic_step("failing outer",
                                 [&](Context& c) {
                                   write_tag(store, c, outer_failed);
                                   c.atomic_step("inner of it", [&](Context& i) {
                                     write_tag(store, i, inner_of_failed);
                                   });
                                   throw std::runtime_error("outer step failed");
                                 }),
                 std::runtime_error);
    return 1;
  });
  ASSERT_TRUE(out.has_value()) << out.message();
  EXPECT_EQ(written_tags(store, outer), 1u);
  EXPECT_EQ(written_tags(store, inner_failed), 0u) << "the failed inner step's write committed";
  EXPECT_EQ(written_tags(store, outer_failed), 0u) << "the failed outer step's write committed";
  EXPECT_EQ(written_tags(store, inner_of_failed), 0u)
      << "a step inside a failed step kept its write";
}

// Stores with rewind() (idem::RewindableStore): a remembered failure after a failed step
// commits without the writes of the handler's transaction (transactional mode), and without
// the failed step's in any mode.
IDEM_TESTING_CASE(ARememberedFailureAfterAFailedStepCommitsWithoutItsWrites) {
  S& store = this->store();
  IdempotencyGuard guard{store, Options{.scope = this->key("scope"), .remember_failures = true}};
  const std::string done = this->key("done");
  const std::string failed = this->key("failed");
  EXPECT_THROW((void)guard.execute("k",
                                   [&](Context& ctx) -> int {
                                     ctx.atomic_step(
                                         "done", [&](Context& c) { write_tag(store, c, done); });
                                     try {
                                       ctx.atomic_step("fails", [&](Context& c) {
                                         write_tag(store, c, failed);
                                         throw std::runtime_error("step failed");
                                       });
                                     } catch (const std::runtime_error&) {
                                     }
                                     throw std::runtime_error("card declined");
                                   }),
               std::runtime_error);
  auto repeat = guard.execute("k", [] { return 0; });
  EXPECT_TRUE(repeat.replayed());
  EXPECT_EQ(repeat.error(), errc::handler_failed);
  EXPECT_EQ(written_tags(store, failed), 0u);
  // In transactional mode the rewind takes the handler's writes back; in lease mode the step
  // committed on its own.
  EXPECT_EQ(written_tags(store, done), HoldsUntilFinished<S> ? 0u : 1u);
}

// Stores without holds_until_finished: a holder taken over cannot commit an atomic step.
IDEM_TESTING_CASE(AStaleHoldersAtomicStepLeavesNoWrites) {
  S& store = this->store();
  const auto k = this->key();
  const std::string stale_write = this->key("stale");
  const Claim old_holder = this->acquired(k);
  this->advance(this->kLease + this->kLease / 2);
  const Claim takeover = this->acquired(k);
  ASSERT_TRUE(takeover.took_over);
  Context stale(store, Ticket{k, old_holder.fence}, this->kLease);
  try {
    stale.atomic_step("late", [&](Context& c) { write_tag(store, c, stale_write); });
    ADD_FAILURE() << "a stale holder's step committed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::lease_lost) << e.what();
  }
  EXPECT_EQ(written_tags(store, stale_write), 0u);
}

}  // namespace conformance
}  // namespace idem::testing
