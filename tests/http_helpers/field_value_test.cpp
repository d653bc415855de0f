// idem/http/field_value.hpp: what an HTTP field value may hold (RFC 9110 section 5.5).

#include "idem/http/field_value.hpp"

#include <gtest/gtest.h>

#include <string>

namespace idem::http {
namespace {

TEST(FieldValue, VisibleAsciiSpacesTabsAndObsTextAreValid) {
  EXPECT_TRUE(valid_field_value(""));
  EXPECT_TRUE(valid_field_value("Bearer alice"));
  EXPECT_TRUE(valid_field_value("a\tb c"));
  EXPECT_TRUE(valid_field_value("!\"#$%&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~"));
  EXPECT_TRUE(valid_field_value("caf\xc3\xa9 \x80\xff"));
}

// A value is never read up to the byte: it is invalid whole.
TEST(FieldValue, NulCrLfOtherControlsAndDeleteAreInvalid) {
  EXPECT_FALSE(valid_field_value(std::string("X\0AAAA", 6)));
  EXPECT_FALSE(valid_field_value(std::string("Bearer mallory\0-not-alice", 25)));
  EXPECT_FALSE(valid_field_value("a\rb"));
  EXPECT_FALSE(valid_field_value("a\nb"));
  EXPECT_FALSE(valid_field_value("a\r\nX-Injected: 1"));
  for (int c = 1; c < 0x20; ++c) {
    if (c == '\t') continue;
    EXPECT_FALSE(valid_field_value(std::string("a") + static_cast<char>(c))) << c;
  }
  EXPECT_FALSE(valid_field_value("a\x7f"));
}

}  // namespace
}  // namespace idem::http
