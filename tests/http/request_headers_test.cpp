// The payments example's header and stored-answer parsing (request_headers.hpp), byte by byte.
// fuzz/http_headers_fuzz.cpp runs the same functions on arbitrary bytes.

#include "request_headers.hpp"

#include <gtest/gtest.h>

#include <string>

namespace payments {
namespace {

TEST(IdempotencyKeyHeaderTest, BareAndQuotedKeysAreTakenAndEverythingElseIsRefused) {
  EXPECT_EQ(parse_idempotency_key("order-42").key, "order-42");
  EXPECT_EQ(parse_idempotency_key("\"8e03978e-40d5\"").key, "8e03978e-40d5");
  EXPECT_EQ(parse_idempotency_key(R"("a\"b\\c")").key, R"(a"b\c)");
  EXPECT_EQ(parse_idempotency_key(std::string(255, 'k')).key, std::string(255, 'k'));
  for (const std::string& bad :
       {std::string(), std::string("\"\""), std::string("\"abc"), std::string("\"abc\"x"),
        std::string(R"("a\nb")"), std::string("\"a\\"), std::string("k\x01"), std::string("k\x7f"),
        std::string("caf\xc3\xa9"), std::string("k\0k", 3), std::string(256, 'k'),
        "\"" + std::string(256, 'k') + "\""}) {
    const IdempotencyKey parsed = parse_idempotency_key(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    EXPECT_TRUE(parsed.key.empty()) << bad;
  }
}

TEST(IdempotencyKeyHeaderTest, BearerNamesThePrincipal) {
  EXPECT_EQ(bearer_principal("Bearer alice"), "alice");
  EXPECT_FALSE(bearer_principal("Bearer "));
  EXPECT_FALSE(bearer_principal("Basic YWxpY2U="));
  EXPECT_FALSE(bearer_principal(""));
}

TEST(IdempotencyKeyHeaderTest, StoredAnswersAreReadOnlyInTheFormTheServiceWrites) {
  const std::string stored = format_stored_answer(201, R"({"id":"pay_1"})");
  const auto answer = parse_stored_answer(stored);
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 201);
  EXPECT_EQ(answer->body, R"({"id":"pay_1"})");
  // Not three digits of a status, a newline, then the body: not an answer of this service.
  for (const char* bad : {"", "201", "\n{}", "20\n{}", "2010\n{}", " 20\n{}", "-01\n{}", "abc\n",
                          "199\n{}", "600\n{}"}) {
    EXPECT_FALSE(parse_stored_answer(bad)) << bad;
  }
}

}  // namespace
}  // namespace payments
