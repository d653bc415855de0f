// idem/codecs/json.hpp: a type with to_json/from_json round-trips through the store as JSON;
// corrupt bytes and JSON of another shape are errc::record_corrupt; built-in codecs are kept.

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "idem/codecs/json.hpp"
#include "idem/idem.hpp"

namespace shop {

struct Receipt {
  std::string charge_id;
  std::int64_t amount_cents = 0;
  std::vector<std::string> tags;
  std::map<std::string, int> counts;
  friend bool operator==(const Receipt&, const Receipt&) = default;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Receipt, charge_id, amount_cents, tags, counts)

}  // namespace shop

namespace idem {
namespace {

struct NoJson {
  int x = 0;
};

static_assert(Codable<shop::Receipt>);
static_assert(!JsonConvertible<NoJson>);
static_assert(!Codable<NoJson>);  // no to_json/from_json: still no codec, and no hard error
static_assert(Codable<std::vector<shop::Receipt>>);
// Built-in codecs stay: bytes stay bytes, integers stay fixed-width.
static_assert(std::is_same_v<decltype(codec<std::string>::view(std::string())), std::string_view>);
static_assert(
    std::is_same_v<decltype(codec<std::vector<std::uint8_t>>::view({})), std::string_view>);

template <class T>
errc decode_error(std::string_view bytes) {
  try {
    (void)codec<T>::decode(bytes);
  } catch (const Error& e) {
    return static_cast<errc>(e.code().value());
  }
  ADD_FAILURE() << "decoded: " << bytes;
  return errc::key_invalid;
}

TEST(JsonCodec, RoundTripsThroughCompactJson) {
  const shop::Receipt r{"ch_1", 1999, {"a", "\"quoted\"", "caf\xc3\xa9"}, {{"x", 1}}};
  const std::string bytes = codec<shop::Receipt>::encode(r);
  EXPECT_EQ(bytes.find('\n'), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(bytes)["amount_cents"], 1999);
  EXPECT_EQ(codec<shop::Receipt>::decode(bytes), r);

  const std::vector<shop::Receipt> many{r, shop::Receipt{"ch_2", -1, {}, {}}};
  EXPECT_EQ(
      codec<std::vector<shop::Receipt>>::decode(codec<std::vector<shop::Receipt>>::encode(many)),
      many);
  EXPECT_EQ(codec<std::vector<std::uint8_t>>::encode({1, 2}), std::string("\x01\x02"));
}

TEST(JsonCodec, CorruptBytesAreRecordCorrupt) {
  for (const std::string& bad : {std::string(), std::string("{"), std::string("\xff\xfe"),
                                 std::string("{\"charge_id\":\"x\"} trailing"),
                                 std::string("{\"charge_id\":\"x\",\"amount_cents\":1,", 30)}) {
    EXPECT_EQ(decode_error<shop::Receipt>(bad), errc::record_corrupt) << bad;
  }
}

TEST(JsonCodec, JsonOfAnotherShapeIsRecordCorrupt) {
  for (const char* other : {"[]", "42", "null", R"({"charge_id":"x"})",
                            R"({"charge_id":1,"amount_cents":1,"tags":[],"counts":{}})",
                            R"({"charge_id":"x","amount_cents":"1","tags":[],"counts":{}})"}) {
    EXPECT_EQ(decode_error<shop::Receipt>(other), errc::record_corrupt) << other;
  }
}

TEST(JsonCodec, AGuardReplaysTheValueAndReportsACorruptRecord) {
  MemoryStore store;
  IdempotencyGuard guard{store};
  int runs = 0;
  auto charge = [&] {
    return guard.execute(Key{"k"}, [&] {
      ++runs;
      return shop::Receipt{"ch_1", 500, {"first"}, {}};
    });
  };
  const Outcome<shop::Receipt> first = charge();
  const Outcome<shop::Receipt> again = charge();
  ASSERT_TRUE(first);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(again.value(), first.value());
  EXPECT_EQ(runs, 1);

  // The same key read as another type: the stored JSON does not fit, which is record_corrupt.
  const Outcome<std::vector<shop::Receipt>> other =
      guard.execute(Key{"k"}, [] { return std::vector<shop::Receipt>{}; });
  EXPECT_EQ(other.error(), errc::record_corrupt);
}

}  // namespace
}  // namespace idem
