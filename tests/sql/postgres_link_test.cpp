// PgLink, the blocking stores' libpq connection core, against the test server: a script answers
// its last statement, a server error is typed and leaves the connection usable, bytea and
// integers come back as sent, and every wait is bounded on the client side (a silent server, a
// connect nobody answers) with the connection given up.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "postgres/pg_link.hpp"
#include "sql/pg_relay.hpp"
#include "support/pg_env.hpp"

namespace idem::postgres::detail {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kBudget{5000};

Query script(std::string sql) { return Query{.kind = Query::script, .sql = std::move(sql)}; }

class PgLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto uri = testing::pg_uri();
    if (!uri) GTEST_SKIP() << testing::kNoPgMessage;
    uri_ = *uri;
  }
  std::string uri_;
};

TEST_F(PgLinkTest, AScriptAnswersItsLastStatementAndAnErrorLeavesTheLinkUsable) {
  PgLink link(uri_, kBudget);
  const Reply last = link.run(script("SELECT 1; SELECT 2, 'two'"), kBudget);
  ASSERT_EQ(last.row_count(), 1);
  std::int64_t n = 0;
  ASSERT_TRUE(last.integer(0, 0, n));
  EXPECT_EQ(n, 2);
  EXPECT_EQ(last.text(0, 1), "two");
  try {
    link.run(script("SELECT 1; SELECT 1 / 0; SELECT 3"), kBudget);
    ADD_FAILURE() << "a division by zero answered";
  } catch (const PgError& e) {
    EXPECT_EQ(e.sqlstate, "22012") << e.what();
  }
  EXPECT_TRUE(link.is_open());
  EXPECT_TRUE(link.looks_alive());
  const Reply after = link.run(script("SELECT 3"), kBudget);
  ASSERT_TRUE(after.integer(0, 0, n));
  EXPECT_EQ(n, 3);
}

TEST_F(PgLinkTest, PreparedStatementsTakeBinaryBytesAndTextAndAnswerThem) {
  PgLink link(uri_, kBudget);
  link.run(
      {.kind = Query::prepare, .name = "idem_link_echo", .sql = "SELECT $1::bytea, $2::bigint"},
      kBudget);
  const std::string bytes("a\0b'\\\xff", 6);
  Query q{.kind = Query::prepared, .name = "idem_link_echo"};
  q.params.bytes(bytes);
  q.params.number(-9'000'000'000'000'000'000);
  const Reply r = link.run(q, kBudget);
  std::string back;
  ASSERT_TRUE(r.bytes(0, 0, back));
  EXPECT_EQ(back, bytes);
  std::int64_t n = 0;
  ASSERT_TRUE(r.integer(0, 1, n));
  EXPECT_EQ(n, -9'000'000'000'000'000'000);
  // The same as text parameters, and as an EXECUTE literal escaped on the connection.
  const Reply text = link.run(
      {.kind = Query::prepared, .name = "idem_link_echo", .values = {"\\x27", "42"}}, kBudget);
  ASSERT_TRUE(text.bytes(0, 0, back));
  EXPECT_EQ(back, "'");
  const Reply literal =
      link.run(script("EXECUTE idem_link_echo('" + link.escape("\\x27") + "', '7')"), kBudget);
  ASSERT_TRUE(literal.bytes(0, 0, back));
  EXPECT_EQ(back, "'");
}

TEST_F(PgLinkTest, ASilentServerIsGivenUpAfterTheBudgetAndTheLinkIsClosed) {
  auto relay = testing::pg_relay(uri_);
  if (!relay) GTEST_SKIP() << "the relay speaks IPv4; the test server is not on it";
  PgLink link(relay->uri, kBudget);
  relay->relay->stall();
  const auto start = Clock::now();
  EXPECT_THROW(link.run(script("SELECT 1"), milliseconds{300}), NoReply);
  EXPECT_GE(Clock::now() - start, milliseconds{300});
  EXPECT_LT(Clock::now() - start, milliseconds{10'000});
  EXPECT_FALSE(link.is_open());
  EXPECT_THROW(link.run(script("SELECT 1"), kBudget), LinkLost);
}

TEST_F(PgLinkTest, AConnectNobodyAnswersFailsWithinItsBudget) {
  auto relay = testing::pg_relay(uri_);
  if (!relay) GTEST_SKIP() << "the relay speaks IPv4; the test server is not on it";
  relay->relay->stall();
  const auto start = Clock::now();
  EXPECT_THROW({ PgLink stalled(relay->uri, milliseconds{300}); }, LinkLost);
  EXPECT_LT(Clock::now() - start, milliseconds{10'000});
}

TEST_F(PgLinkTest, AConnectionTheServerEndsIsLostNotAnError) {
  auto relay = testing::pg_relay(uri_);
  if (!relay) GTEST_SKIP() << "the relay speaks IPv4; the test server is not on it";
  PgLink link(relay->uri, kBudget);
  relay->relay->cut();
  EXPECT_THROW(link.run(script("SELECT 1"), kBudget), LinkLost);
  EXPECT_FALSE(link.is_open());
}

}  // namespace
}  // namespace idem::postgres::detail
