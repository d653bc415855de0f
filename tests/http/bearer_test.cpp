// The payments example's demo authentication (request_headers.hpp): Authorization: Bearer <name>,
// the scheme matched without regard to case. fuzz/http_headers_fuzz.cpp runs it on arbitrary bytes.

#include <gtest/gtest.h>

#include <string>

#include "request_headers.hpp"

namespace payments {
namespace {

TEST(BearerPrincipal, TheNameAfterTheSchemeInAnyCase) {
  EXPECT_EQ(bearer_principal("Bearer alice"), "alice");
  EXPECT_EQ(bearer_principal("bearer alice"), "alice");
  EXPECT_EQ(bearer_principal("BEARER alice"), "alice");
  EXPECT_EQ(bearer_principal("Bearer   alice"), "alice");
}

TEST(BearerPrincipal, NoNameOrAnotherSchemeIsNoPrincipal) {
  EXPECT_FALSE(bearer_principal("Bearer "));
  EXPECT_FALSE(bearer_principal("Bearer    "));
  EXPECT_FALSE(bearer_principal("Bearer"));
  EXPECT_FALSE(bearer_principal("Beareralice"));
  EXPECT_FALSE(bearer_principal("Basic YWxpY2U="));
  EXPECT_FALSE(bearer_principal(""));
}

// A name is never cut at a byte it may not hold: "mallory\0-not-alice" is not mallory.
TEST(BearerPrincipal, ANameWithAControlByteOrASpaceIsNoPrincipal) {
  EXPECT_FALSE(bearer_principal(std::string("Bearer mallory\0-not-alice", 27)));
  EXPECT_FALSE(bearer_principal("Bearer mallory\x01"));
  EXPECT_FALSE(bearer_principal("Bearer mallory\x7f"));
  EXPECT_FALSE(bearer_principal("Bearer mallory alice"));
  EXPECT_FALSE(
      bearer_principal("Bearer al\xc3\xaf"
                       "ce"));
  EXPECT_EQ(bearer_principal("Bearer a-Z_0.9~+/="), "a-Z_0.9~+/=");
}

}  // namespace
}  // namespace payments
