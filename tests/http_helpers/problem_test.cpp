// idem/http/problem.hpp: the status, RFC 9457 problem+json body and Retry-After an HTTP service
// answers for an outcome; Retry-After computed from the remaining lease of a key held by the
// two-phase API, on a ManualClock so the seconds are exact.

#include "idem/http/problem.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "idem/idem.hpp"

namespace idem::http {
namespace {

using namespace std::chrono_literals;

TEST(ProblemJson, HoldsTypeTitleStatusAndDetailEscaped) {
  EXPECT_EQ(problem_json({.type = "https://example.com/errors/in_progress",
                          .title = "Busy",
                          .status = 409,
                          .detail = "key \"k\" is held\n\\",
                          .instance = "/payments"}),
            R"({"type":"https://example.com/errors/in_progress","title":"Busy","status":409,)"
            R"("detail":"key \"k\" is held\n\\","instance":"/payments"})");
  EXPECT_EQ(problem_json({.title = std::string("a\x01\x7f", 3), .status = 500}),
            R"({"type":"about:blank","title":"a\u0001\u007f","status":500})");
}

// A detail is often a handler's exception text, which may hold any bytes: the body stays valid
// JSON (RFC 8259: UTF-8), well-formed UTF-8 kept, every other byte replaced by U+FFFD.
TEST(ProblemJson, BytesThatAreNotUtf8BecomeTheReplacementCharacter) {
  const std::string replacement = "\xef\xbf\xbd";
  const auto detail_of = [](std::string_view detail) {
    const std::string body =
        problem_json({.title = "t", .status = 500, .detail = std::string(detail)});
    const std::string head = R"({"type":"about:blank","title":"t","status":500,"detail":")";
    EXPECT_EQ(body.substr(0, head.size()), head) << body;
    return body.substr(head.size(), body.size() - head.size() - 2);
  };
  EXPECT_EQ(detail_of("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x92\xb3"),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x92\xb3");  // é € 💳 kept
  EXPECT_EQ(detail_of("a\xff"
                      "b"),
            "a" + replacement + "b");                                             // not a lead byte
  EXPECT_EQ(detail_of("\xc3"), replacement);                                      // cut short
  EXPECT_EQ(detail_of("\xc0\xaf"), replacement + replacement);                    // overlong '/'
  EXPECT_EQ(detail_of("\xed\xa0\x80"), replacement + replacement + replacement);  // surrogate
  EXPECT_EQ(detail_of("\xf4\x90\x80\x80"), replacement + replacement + replacement + replacement);
  EXPECT_EQ(detail_of("\x80x"), replacement + "x");  // a continuation byte alone
}

TEST(ProblemJson, TypeIsTheServicesDocumentationOrAUrnNamingTheError) {
  const Problem urn = problem_of(errc::payload_mismatch, "another body");
  EXPECT_EQ(urn.type, "urn:idem:problem:payload_mismatch");
  EXPECT_EQ(urn.status, 422);
  EXPECT_EQ(urn.title, make_error_code(errc::payload_mismatch).message());
  EXPECT_EQ(urn.detail, "another body");

  const Problem docs = problem_of(errc::in_progress, "", {"https://example.com/errors/", "/pay"});
  EXPECT_EQ(docs.type, "https://example.com/errors/in_progress");
  EXPECT_EQ(docs.instance, "/pay");
  EXPECT_EQ(problem_of(std::make_error_code(std::errc::io_error), "").type,
            "urn:idem:problem:error");
}

TEST(RetryAfter, IsWholeSecondsRoundedUpAndAtLeastOne) {
  EXPECT_EQ(retry_after_seconds(0ms), 1);
  EXPECT_EQ(retry_after_seconds(1ms), 1);
  EXPECT_EQ(retry_after_seconds(1000ms), 1);
  EXPECT_EQ(retry_after_seconds(1001ms), 2);
  EXPECT_EQ(retry_after_seconds(29'999ms), 30);
  EXPECT_EQ(retry_after_seconds(30'000ms), 30);
}

TEST(OutcomeStatus, ValuesAreTheSuccessStatusAndErrorsTheirOwn) {
  EXPECT_EQ(status_of(Outcome<int>::fresh(1), 201), 201);
  EXPECT_EQ(status_of(Outcome<int>::replay(1)), 200);
  EXPECT_FALSE(problem_for(Outcome<int>::fresh(1)));
  EXPECT_FALSE(retry_after_of(Outcome<int>::replay(1)));

  const auto mismatch = Outcome<int>::failed(make_failure(errc::payload_mismatch, "not the same"));
  EXPECT_EQ(status_of(mismatch), 422);
  EXPECT_FALSE(retry_after_of(mismatch));  // a retry cannot succeed
  const auto problem = problem_for(mismatch);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->status, 422);
  EXPECT_FALSE(problem->retry_after);
  EXPECT_EQ(problem->body, problem_json(problem_of(errc::payload_mismatch, "not the same")));
}

TEST(OutcomeStatus, AFreshValueWhoseCommitARetrySettlesIsThatError) {
  // The handler ran but its result may not be recorded: not a success; retry with the same key.
  for (const errc e : {errc::store_unavailable, errc::outcome_unknown}) {
    const auto out = Outcome<int>::fresh(1, make_failure(e, "commit lost"));
    EXPECT_EQ(status_of(out, 201), http_status(e));
    const auto problem = problem_for(out);
    ASSERT_TRUE(problem);
    EXPECT_EQ(problem->retry_after, 1);
    EXPECT_NE(problem->body.find("\"detail\":\"commit lost\""), std::string::npos);
  }
  // result_too_large: the value is the answer, only not kept for repeats.
  EXPECT_EQ(status_of(Outcome<int>::fresh(1, make_failure(errc::result_too_large)), 201), 201);
}

TEST(OutcomeStatus, AFreshValueATakeoverSupersededIsLeaseLost) {
  // Another holder took the key over: its result, not this value, is the key's answer, and a
  // repeat with the same key replays it.
  const auto out = Outcome<int>::fresh(1, make_failure(errc::lease_lost, "taken over"));
  EXPECT_EQ(answer_error(out), make_error_code(errc::lease_lost));
  EXPECT_EQ(status_of(out, 201), 409);
  const auto problem = problem_for(out);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->status, 409);
  EXPECT_EQ(problem->retry_after, 1);
  EXPECT_NE(problem->body.find("\"detail\":\"taken over\""), std::string::npos);
}

TEST(OutcomeStatus, RetryAfterIsTheHeldKeysRemainingLeaseRoundedUp) {
  auto clock = std::make_shared<ManualClock>();
  MemoryStore store(MemoryStoreOptions{.clock = clock});
  IdempotencyGuard guard{store, Options{.lease = 30s, .clock = clock}};
  auto holder = guard.begin<int>(Key{"k"});
  ASSERT_TRUE(holder.acquired());

  auto busy_after = [&](std::chrono::milliseconds elapsed) {
    clock->advance(elapsed);
    auto refused = guard.begin<int>(Key{"k"});
    EXPECT_FALSE(refused.acquired());
    const auto problem = problem_for(refused.outcome());
    EXPECT_TRUE(problem);
    EXPECT_EQ(problem->status, 409);
    EXPECT_NE(problem->body.find("urn:idem:problem:in_progress"), std::string::npos);
    EXPECT_EQ(problem->retry_after, retry_after_of(refused.outcome()));
    return problem ? problem->retry_after.value_or(-1) : -1;
  };
  EXPECT_EQ(busy_after(0ms), 30);
  EXPECT_EQ(busy_after(10'500ms), 20);  // 19.5 s left: rounded up
  EXPECT_EQ(busy_after(19'000ms), 1);   // 0.5 s left
  ASSERT_TRUE(holder.commit(7));
}

}  // namespace
}  // namespace idem::http
