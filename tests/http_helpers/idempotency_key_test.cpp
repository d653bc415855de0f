// idem/http/idempotency_key.hpp: the Idempotency-Key header value as the IETF draft defines it
// (an RFC 8941 sf-string with ignored parameters), a bare key where allowed, and one test per
// refusal. fuzz/http_headers_fuzz.cpp runs the same parser on arbitrary bytes.

#include "idem/http/idempotency_key.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace idem::http {
namespace {

std::string key_of(std::string_view value, const KeyRules& rules = {}) {
  const ParsedKey parsed = parse_idempotency_key(value, rules);
  EXPECT_TRUE(parsed.ok()) << value << ": " << parsed.reason();
  EXPECT_TRUE(parsed.reason().empty());
  return parsed.key();
}

KeyRefusal refusal_of(std::string_view value, const KeyRules& rules = {}) {
  const ParsedKey parsed = parse_idempotency_key(value, rules);
  EXPECT_FALSE(parsed.ok()) << value << " was taken as " << parsed.key();
  EXPECT_TRUE(parsed.key().empty());
  EXPECT_EQ(parsed.reason(), describe(parsed.refusal()));
  return parsed.refusal();
}

TEST(IdempotencyKeyHeader, TheDraftsExamplesAreTheirQuotedKeys) {
  // The draft's examples: Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324" and
  // Idempotency-Key: "clkyoesmbgybucifusbbtdsbohtyuuwz".
  EXPECT_EQ(key_of(R"("8e03978e-40d5-43e8-bc93-6894a57f9324")"),
            "8e03978e-40d5-43e8-bc93-6894a57f9324");
  EXPECT_EQ(key_of(R"("clkyoesmbgybucifusbbtdsbohtyuuwz")"), "clkyoesmbgybucifusbbtdsbohtyuuwz");
}

TEST(IdempotencyKeyHeader, EscapesAreUndoneAndSurroundingSpacesIgnored) {
  EXPECT_EQ(key_of(R"("a\"b\\c")"), R"(a"b\c)");
  EXPECT_EQ(key_of("  \"k\"\t "), "k");
  EXPECT_EQ(key_of("\" spaced key \""), " spaced key ");
  EXPECT_EQ(key_of(quote_key(R"(x"y\z)")), R"(x"y\z)");
}

TEST(IdempotencyKeyHeader, ParametersAreAcceptedAndIgnored) {
  for (const char* value :
       {R"("k";p=1)", R"("k";p)", R"("k"; p=1;q=?0)", R"("k";a=-12;b=3.25;c="x;y")",
        R"("k";tok=abc/def:g;bytes=:aGk=:)", R"("k";*star=*t)", R"("k";p=?1;p=2)"}) {
    EXPECT_EQ(key_of(value), "k") << value;
  }
}

TEST(IdempotencyKeyHeader, BareValuesAreTakenWholeUnlessOnlyStringsAreAccepted) {
  EXPECT_EQ(key_of("order-42"), "order-42");
  EXPECT_EQ(key_of("a b;c=d"), "a b;c=d");
  EXPECT_EQ(refusal_of("order-42", {.accept_bare = false}), KeyRefusal::not_a_string);
  EXPECT_EQ(key_of("\"order-42\"", {.accept_bare = false}), "order-42");
}

TEST(IdempotencyKeyHeader, MissingAndEmptyAreRefused) {
  EXPECT_EQ(refusal_of(""), KeyRefusal::missing);
  EXPECT_EQ(refusal_of("  \t"), KeyRefusal::missing);
  EXPECT_EQ(refusal_of("\"\""), KeyRefusal::empty);
  EXPECT_EQ(refusal_of("\"\";p=1"), KeyRefusal::empty);
}

TEST(IdempotencyKeyHeader, BytesOutsidePrintableAsciiAreRefused) {
  for (const std::string& value :
       {std::string("k\x01"), std::string("k\x7f"), std::string("caf\xc3\xa9"),
        std::string("k\0k", 3), std::string("\"a\nb\""), std::string("\"caf\xc3\xa9\"")}) {
    EXPECT_EQ(refusal_of(value), KeyRefusal::not_printable) << value;
  }
}

TEST(IdempotencyKeyHeader, EscapesOtherThanQuoteAndBackslashAreRefused) {
  EXPECT_EQ(refusal_of(R"("a\nb")"), KeyRefusal::bad_escape);
  EXPECT_EQ(refusal_of(R"("\u0041")"), KeyRefusal::bad_escape);
}

TEST(IdempotencyKeyHeader, AStringWithoutItsClosingQuoteIsRefused) {
  EXPECT_EQ(refusal_of("\"abc"), KeyRefusal::unterminated);
  EXPECT_EQ(refusal_of("\"abc\\"), KeyRefusal::unterminated);
  EXPECT_EQ(refusal_of("\""), KeyRefusal::unterminated);
}

TEST(IdempotencyKeyHeader, WhatFollowsTheStringMustBeParameters) {
  for (const char* value :
       {R"("k"x)", R"("k" "l")", R"("k",  "l")", R"("k";)", R"("k";P=1)", R"("k";1p=1)",
        R"("k";p=)", R"("k";p="unterminated)", R"("k";p=?2)", R"("k";p=1.2345)",
        R"("k";p=1234567890123456)", R"("k";p=:aGk=)", R"("k";p=-)", R"("k";p=1;;)"}) {
    EXPECT_EQ(refusal_of(value), KeyRefusal::bad_parameter) << value;
  }
}

TEST(IdempotencyKeyHeader, KeysLongerThanTheLimitAreRefused) {
  EXPECT_EQ(key_of(std::string(255, 'k')), std::string(255, 'k'));
  EXPECT_EQ(refusal_of(std::string(256, 'k')), KeyRefusal::too_long);
  EXPECT_EQ(refusal_of("\"" + std::string(256, 'k') + "\""), KeyRefusal::too_long);
  EXPECT_EQ(key_of("\"abcd\"", {.max_bytes = 4}), "abcd");
  EXPECT_EQ(refusal_of("\"abcde\"", {.max_bytes = 4}), KeyRefusal::too_long);
}

TEST(IdempotencyKeyHeader, EveryRefusalHasItsOwnReason) {
  std::set<std::string_view> reasons;
  for (const KeyRefusal r :
       {KeyRefusal::missing, KeyRefusal::empty, KeyRefusal::not_printable, KeyRefusal::bad_escape,
        KeyRefusal::unterminated, KeyRefusal::bad_parameter, KeyRefusal::not_a_string,
        KeyRefusal::too_long, KeyRefusal::repeated}) {
    EXPECT_TRUE(describe(r).starts_with("Idempotency-Key ")) << describe(r);
    reasons.insert(describe(r));
  }
  EXPECT_EQ(reasons.size(), 9U);
  EXPECT_EQ(describe(static_cast<KeyRefusal>(200)), "Idempotency-Key is refused");
}

// The field is one sf-string: two fields are a list, refused whatever their values (never the
// first of them, which a proxy in front might not have picked).
TEST(IdempotencyKeyFields, MoreThanOneFieldIsRefusedWhateverTheValues) {
  using Fields = std::vector<std::string_view>;
  EXPECT_EQ(parse_idempotency_key_fields(Fields{"k-1", "k-2"}).refusal(), KeyRefusal::repeated);
  EXPECT_EQ(parse_idempotency_key_fields(Fields{"k-1", "k-1"}).refusal(), KeyRefusal::repeated);
  EXPECT_EQ(parse_idempotency_key_fields(Fields{"\"k\"", "", "k"}).refusal(), KeyRefusal::repeated);
  EXPECT_FALSE(parse_idempotency_key_fields(Fields{"k-1", "k-2"}).ok());
}

TEST(IdempotencyKeyFields, OneFieldIsItsKeyAndNoneIsMissing) {
  EXPECT_EQ(parse_idempotency_key_fields(std::vector<std::string>{" \"k-1\";p=1 "}).key(), "k-1");
  EXPECT_EQ(parse_idempotency_key_fields(std::vector<std::string_view>{}).refusal(),
            KeyRefusal::missing);
  EXPECT_EQ(parse_idempotency_key_fields(std::vector<std::string_view>{"k\x01"}).refusal(),
            KeyRefusal::not_printable);
}

}  // namespace
}  // namespace idem::http
