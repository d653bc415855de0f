// idem::errc, its category, HTTP statuses and retry guidance.

#include "idem/error.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <iterator>
#include <set>
#include <string>
#include <utility>
#include <variant>

#include "idem/outcome.hpp"
#include "idem/result.hpp"

namespace idem {
namespace {

constexpr errc kAll[] = {errc::key_invalid,    errc::payload_mismatch,   errc::in_progress,
                         errc::token_invalid,  errc::invalid_transition, errc::version_conflict,
                         errc::lease_lost,     errc::store_unavailable,  errc::result_too_large,
                         errc::handler_failed, errc::record_corrupt,     errc::outcome_unknown,
                         errc::step_mismatch,  errc::config_invalid,     errc::handler_aborted};

TEST(ErrorTest, EveryCodeHasItsOwnMessageInTheIdemCategory) {
  std::set<std::string> messages;
  for (errc e : kAll) {
    const std::error_code ec = e;  // implicit: errc is an error code enum
    EXPECT_STREQ(ec.category().name(), "idem");
    EXPECT_NE(ec.message(), "unknown idem error");
    messages.insert(ec.message());
  }
  EXPECT_EQ(messages.size(), std::size(kAll));
  EXPECT_EQ(make_error_code(static_cast<errc>(999)).message(), "unknown idem error");
}

TEST(ErrorTest, ToStringNamesTheEnumerator) {
  EXPECT_EQ(to_string(errc::payload_mismatch), "payload_mismatch");
  EXPECT_EQ(to_string(errc::record_corrupt), "record_corrupt");
  EXPECT_EQ(to_string(errc::outcome_unknown), "outcome_unknown");
  EXPECT_EQ(to_string(std::error_code(errc::outcome_unknown)), "outcome_unknown");
  std::set<std::string_view> names;
  for (errc e : kAll) names.insert(to_string(e));
  EXPECT_EQ(names.size(), std::size(kAll));
  EXPECT_EQ(names.count("unknown"), 0u);
}

TEST(ErrorTest, HttpStatusOfEachCode) {
  EXPECT_EQ(http_status({}), 200);
  EXPECT_EQ(http_status(errc::key_invalid), 400);
  EXPECT_EQ(http_status(errc::token_invalid), 400);
  EXPECT_EQ(http_status(errc::payload_mismatch), 422);
  EXPECT_EQ(http_status(errc::in_progress), 409);
  EXPECT_EQ(http_status(errc::invalid_transition), 409);
  EXPECT_EQ(http_status(errc::version_conflict), 409);
  EXPECT_EQ(http_status(errc::lease_lost), 409);
  EXPECT_EQ(http_status(errc::store_unavailable), 503);
  EXPECT_EQ(http_status(errc::result_too_large), 500);
  EXPECT_EQ(http_status(errc::handler_failed), 500);
  EXPECT_EQ(http_status(errc::record_corrupt), 500);
  EXPECT_EQ(http_status(errc::outcome_unknown), 504);
  EXPECT_EQ(http_status(errc::step_mismatch), 500);
  EXPECT_EQ(http_status(errc::config_invalid), 500);
  EXPECT_EQ(http_status(errc::handler_aborted), 500);
  EXPECT_EQ(http_status(std::make_error_code(std::errc::io_error)), 500);
}

TEST(ErrorTest, RetryGuidance) {
  std::set<errc> retryable;
  for (errc e : kAll) {
    if (is_retryable(e)) retryable.insert(e);
  }
  EXPECT_EQ(retryable,
            (std::set<errc>{errc::in_progress, errc::store_unavailable, errc::version_conflict,
                            errc::lease_lost, errc::outcome_unknown, errc::handler_aborted}));
  EXPECT_FALSE(is_retryable(std::make_error_code(std::errc::io_error)));
}

// Every mapping reads one table: each code has its entry, and a value that is no code (a corrupt
// stored code) has none, whichever way it is asked.
TEST(ErrorTest, TheFactsTableHasOneEntryPerCodeAndNoOther) {
  static_assert(to_string(errc::in_progress) == "in_progress");
  for (errc e : kAll) {
    const ErrcFacts* facts = facts_of(e);
    ASSERT_NE(facts, nullptr) << static_cast<int>(e);
    EXPECT_EQ(facts->code, e);
    EXPECT_EQ(facts_of(make_error_code(e)), facts);
    EXPECT_EQ(facts->name, to_string(e));
    EXPECT_EQ(std::string(facts->message), make_error_code(e).message());
    EXPECT_EQ(facts->http_status, http_status(e));
    EXPECT_EQ(facts->retryable, is_retryable(e));
  }
  for (int value : {0, -3, static_cast<int>(std::size(kAll)) + 1, 999}) {
    const auto e = static_cast<errc>(value);
    EXPECT_EQ(facts_of(e), nullptr) << value;
    EXPECT_EQ(to_string(e), "unknown") << value;
    EXPECT_FALSE(is_retryable(make_error_code(e))) << value;
    // An error_code whose value is 0 is no error, whatever its category.
    EXPECT_EQ(http_status(make_error_code(e)), value == 0 ? 200 : 500) << value;
  }
  EXPECT_EQ(facts_of(std::error_code{}), nullptr);
  EXPECT_EQ(facts_of(std::make_error_code(std::errc::io_error)), nullptr);
}

TEST(ErrorTest, ErrorIsASystemErrorWithCodeAndMessage) {
  const Error e(errc::in_progress, "order 42 is being charged");
  const std::system_error& base = e;
  EXPECT_EQ(base.code(), errc::in_progress);
  EXPECT_NE(std::string(e.what()).find("order 42 is being charged"), std::string::npos);
}

TEST(OutcomeTest, StatesAndFlags) {
  auto fresh = Outcome<int>::fresh(1);
  EXPECT_TRUE(fresh && fresh.executed() && fresh.recorded() && !fresh.replayed());
  EXPECT_FALSE(fresh.error());
  EXPECT_TRUE(fresh.message().empty());

  auto unrecorded = Outcome<int>::fresh(1, make_failure(errc::lease_lost));
  EXPECT_TRUE(unrecorded.executed());
  EXPECT_FALSE(unrecorded.recorded());
  EXPECT_EQ(unrecorded.commit_error(), errc::lease_lost);
  EXPECT_FALSE(unrecorded);  // superseded by the holder that took over: not the key's answer
  EXPECT_EQ(unrecorded.error(), errc::lease_lost);
  EXPECT_EQ(unrecorded.value(), 1);  // still there for the caller that wants it

  // A commit whose fate is unknown keeps the value as the answer: a retry replays it or runs.
  auto unknown = Outcome<int>::fresh(1, make_failure(errc::outcome_unknown, "no reply"));
  EXPECT_TRUE(unknown);
  EXPECT_FALSE(unknown.error());
  EXPECT_FALSE(unknown.recorded());
  EXPECT_EQ(unknown.commit_error(), errc::outcome_unknown);

  auto replay = Outcome<std::string>::replay("r");
  EXPECT_TRUE(replay.replayed() && !replay.executed() && !replay.recorded());
  EXPECT_EQ(std::move(replay).value(), "r");

  auto failed = Outcome<void>::failed(make_failure(errc::in_progress, "busy"));
  EXPECT_FALSE(failed);
  EXPECT_EQ(failed.error(), errc::in_progress);
  EXPECT_EQ(failed.message(), "busy");
  EXPECT_THROW(failed.value(), Error);
  EXPECT_NO_THROW(Outcome<void>::fresh({}).value());
}

// Success carries no Failure; the accessors still answer with an empty one.
TEST(OutcomeTest, EmptyFailuresReadAsSuccess) {
  auto fresh = Outcome<int>::fresh(1);
  EXPECT_FALSE(fresh.commit_error());
  EXPECT_FALSE(fresh.commit_failure().code);
  EXPECT_TRUE(fresh.commit_failure().message.empty());

  // A commit failure without a code is no failure: the value counts as recorded.
  auto recorded = Outcome<int>::fresh(2, Failure{});
  EXPECT_TRUE(recorded.recorded());
  EXPECT_FALSE(recorded.commit_error());

  const std::string lvalue = "kept";
  auto copied = Outcome<std::string>::fresh(lvalue);
  EXPECT_EQ(copied.value(), "kept");
  EXPECT_EQ(lvalue, "kept");
}

// A Failure taken by reference: moved from an rvalue, copied from an lvalue (which keeps its
// message), with its refusal's details either way; assigning one replaces a value.
TEST(ResultTest, AFailureMovesInOrIsCopiedAndReplacesAValue) {
  Failure busy = make_failure(errc::in_progress, "order 42 is being charged");
  busy.refusal = HolderLease{std::chrono::milliseconds{250}, std::chrono::milliseconds{7}};
  const Result<int> copied(busy);
  EXPECT_EQ(copied.error(), errc::in_progress);
  EXPECT_EQ(copied.failure().message, "order 42 is being charged");
  EXPECT_EQ(busy.message, "order 42 is being charged");  // an lvalue is copied, not moved from

  Result<std::string> r = std::string("value");
  ASSERT_TRUE(r.has_value());
  r = std::move(busy);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error(), errc::in_progress);
  EXPECT_EQ(r.failure().message, "order 42 is being charged");
  const auto* lease = std::get_if<HolderLease>(&r.failure().refusal);
  ASSERT_NE(lease, nullptr);
  EXPECT_EQ(lease->retry_after, std::chrono::milliseconds{7});
  EXPECT_THROW((void)r.value(), Error);

  const Failure kept = make_failure(errc::payload_mismatch, "kept");
  auto from_lvalue = Outcome<int>::failed(kept, /*replayed=*/true);
  EXPECT_EQ(from_lvalue.error(), errc::payload_mismatch);
  EXPECT_TRUE(from_lvalue.replayed());
  EXPECT_EQ(kept.message, "kept");
  auto from_rvalue = Outcome<int>::failed(std::move(r).failure());
  EXPECT_EQ(from_rvalue.retry_after(), std::chrono::milliseconds{7});
  EXPECT_FALSE(from_rvalue.replayed());
}

TEST(StatusTest, OkHoldsNoFailureAndAFailureKeepsItsMessage) {
  const Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_FALSE(ok.error());
  EXPECT_FALSE(ok.failure().code);

  EXPECT_TRUE(Status(Failure{}).ok());  // no code: success, as before

  const Status failed(errc::lease_lost, "taken over");
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(failed.error(), errc::lease_lost);
  EXPECT_EQ(failed.failure().message, "taken over");
  EXPECT_EQ(failed.failure().describe(), "taken over");
}

}  // namespace
}  // namespace idem
