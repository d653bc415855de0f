// codec<T>: exact, byte-for-byte round trips, and refusal of bytes that are not a T.

#include "idem/codec.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace idem {
namespace {

using namespace std::string_literals;

template <class T>
T round_trip(const T& value) {
  return codec<T>::decode(std::string_view(codec<T>::encode(value)));
}

TEST(CodecTest, StringsKeepEveryByte) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  for (const std::string& s : {""s, "\0"s, "a\0b\r\n"s, all, std::string(1 << 20, '\xff')}) {
    EXPECT_EQ(round_trip(s), s);
  }
}

TEST(CodecTest, ByteVectorsKeepEveryByte) {
  std::vector<std::byte> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(static_cast<std::byte>(b));
  EXPECT_EQ(round_trip(bytes), bytes);
  EXPECT_EQ(round_trip(std::vector<std::byte>{}), std::vector<std::byte>{});
  const std::vector<std::uint8_t> u8 = {0, 1, 254, 255};
  EXPECT_EQ(round_trip(u8), u8);
}

template <class Int>
void expect_integer_round_trips() {
  for (Int v : {std::numeric_limits<Int>::min(), Int{0}, Int{1}, std::numeric_limits<Int>::max()}) {
    EXPECT_EQ(round_trip(v), v);
    EXPECT_EQ(codec<Int>::encode(v).size(), sizeof(Int));
  }
}

TEST(CodecTest, IntegersOfEveryWidthAndSign) {
  expect_integer_round_trips<std::int8_t>();
  expect_integer_round_trips<std::uint8_t>();
  expect_integer_round_trips<std::int16_t>();
  expect_integer_round_trips<std::uint16_t>();
  expect_integer_round_trips<std::int32_t>();
  expect_integer_round_trips<std::uint32_t>();
  expect_integer_round_trips<std::int64_t>();
  expect_integer_round_trips<std::uint64_t>();
  EXPECT_EQ(round_trip(-1234567890123LL), -1234567890123LL);
}

TEST(CodecTest, IntegersAreLittleEndianOnEveryHost) {
  EXPECT_EQ(codec<std::uint32_t>::encode(0x01020304u), "\x04\x03\x02\x01"s);
}

enum class Status : std::int16_t { pending = -1, paid = 7 };

TEST(CodecTest, BoolsAndEnums) {
  EXPECT_EQ(round_trip(true), true);
  EXPECT_EQ(round_trip(false), false);
  EXPECT_EQ(round_trip(Status::pending), Status::pending);
  EXPECT_EQ(round_trip(Status::paid), Status::paid);
}

TEST(CodecTest, BytesOfTheWrongShapeAreRecordCorrupt) {
  auto code_of = [](auto decode) {
    try {
      decode();
    } catch (const Error& e) {
      return e.code();
    }
    return std::error_code{};
  };
  EXPECT_EQ(code_of([] { (void)codec<std::int32_t>::decode("abc"); }), errc::record_corrupt);
  EXPECT_EQ(code_of([] { (void)codec<std::int32_t>::decode("abcde"); }), errc::record_corrupt);
  EXPECT_EQ(code_of([] { (void)codec<bool>::decode("\x02"); }), errc::record_corrupt);
  EXPECT_EQ(code_of([] { (void)codec<bool>::decode(""); }), errc::record_corrupt);
  EXPECT_EQ(code_of([] { (void)codec<Status>::decode("\x01"); }), errc::record_corrupt);
}

TEST(CodecTest, CodableNamesTypesWithACodec) {
  static_assert(Codable<std::string>);
  static_assert(Codable<std::vector<std::byte>>);
  static_assert(Codable<int>);
  static_assert(Codable<Status>);
  static_assert(!Codable<std::vector<int>>);
  static_assert(!Codable<double>);
  EXPECT_TRUE(Codable<bool>);
}

}  // namespace
}  // namespace idem
