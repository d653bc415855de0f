// The effective key: scope, principal and id joined so that no two triples collide.

#include "idem/key.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "idem/engine/effective_key.hpp"
#include "idem/engine/entity.hpp"
#include "idem/key_text.hpp"

namespace idem {
namespace {

using namespace std::string_literals;

std::string join(std::string_view scope, std::string_view principal, std::string_view id) {
  return std::string(detail::EffectiveKey(scope, principal, id).view());
}

TEST(EffectiveKeyTest, ShiftingBytesBetweenPartsNeverCollides) {
  const std::vector<std::tuple<std::string, std::string, std::string>> triples = {
      {"ab", "c", "d"},   {"a", "bc", "d"},    {"a", "b", "cd"},   {"abc", "", "d"},
      {"", "abc", "d"},   {"", "", "abcd"},    {"a\0"s, "b", "c"}, {"a", "\0b"s, "c"},
      {"a", "b", "\0c"s}, {"\x01"s, "a", "b"}, {"", "\x01"s, "ab"}};
  std::set<std::string> joined;
  for (const auto& [scope, principal, id] : triples) joined.insert(join(scope, principal, id));
  EXPECT_EQ(joined.size(), triples.size());
}

TEST(EffectiveKeyTest, LengthsAboveOneVarintByteAndKeysAboveTheInlineBuffer) {
  const std::string scope(200, 's');
  const std::string principal(300, 'p');
  const std::string id(1000, '\0');
  const std::string k = join(scope, principal, id);
  // 200 and 300 each take two LEB128 bytes.
  EXPECT_EQ(k.size(), 2 + scope.size() + 2 + principal.size() + id.size());
  EXPECT_EQ(k.substr(0, 2), "\xc8\x01"s);
  EXPECT_EQ(k.substr(k.size() - id.size()), id);
  EXPECT_NE(k, join(scope, principal + "p", std::string(999, '\0')));
}

TEST(EffectiveKeyTest, SameTripleSameBytes) {
  EXPECT_EQ(join("payments.charge", "tenant-7", "k-42"),
            join("payments.charge", "tenant-7", "k-42"));
  EXPECT_EQ(join("s", "", "k"), "\x01s\x00k"s);
}

TEST(EffectiveKeyTest, AMovedKeyKeepsItsBytesInlineAndOnTheHeap) {
  for (const std::size_t size : {std::size_t{8}, std::size_t{1000}}) {
    const std::string id(size, 'k');
    detail::EffectiveKey from("s", "p", id);
    const detail::EffectiveKey to(std::move(from));
    EXPECT_EQ(to.view(), join("s", "p", id));
  }
}

// Entity operations are recorded under these bytes in every backend: they must not change.
TEST(EntityOpKeyTest, AnEffectiveKeyWithoutPrincipalWhoseIdCarriesEntityAndOp) {
  EXPECT_EQ(detail::entity_op_key("orders", "o-1", "ePAY"),
            "\x06orders\x00\x03o-1\x04"
            "ePAY"s);
  EXPECT_EQ(detail::entity_op_key("orders", "o-1", "ePAY"), join("orders", "",
                                                                 "\x03o-1\x04"
                                                                 "ePAY"s));
  EXPECT_NE(detail::entity_op_key("s", "ab", "c"), detail::entity_op_key("s", "a", "bc"));
  const std::string entity(300, 'e');
  const std::string key = detail::entity_op_key("s", entity, "op");
  EXPECT_EQ(key, "\x01s\x00\xac\x02"s + entity + "\x02op");
}

TEST(KeyTest, ConvertsFromStringsWithoutAPrincipal) {
  const std::string id = "k-42";
  Key from_string = id;
  Key from_literal = "k-42";
  Key with_principal{"k-42", "tenant-7"};
  EXPECT_EQ(from_string, from_literal);
  EXPECT_TRUE(from_string.principal.empty());
  EXPECT_EQ(with_principal.principal, "tenant-7");
  EXPECT_NE(from_string, with_principal);
}

// The rule for a key sent as text (HTTP field, gRPC metadata): blanks around it are not part of
// it, and a value of only blanks is no key.
TEST(KeyTextTest, SpacesAndTabsAroundTheKeyAreNotPartOfIt) {
  EXPECT_EQ(key_text(" k"), "k");
  EXPECT_EQ(key_text("k "), "k");
  EXPECT_EQ(key_text("\t k \t"), "k");
  EXPECT_EQ(key_text("k 1"), "k 1");
  EXPECT_EQ(key_text("   "), "");
  EXPECT_EQ(key_text(""), "");
  EXPECT_EQ(key_text("\nk"), "\nk");  // only spaces and tabs: other bytes are the caller's rules
}

}  // namespace
}  // namespace idem
