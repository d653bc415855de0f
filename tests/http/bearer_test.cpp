// The payments example's demo authentication (request_headers.hpp): Authorization: Bearer <name>,
// the scheme matched without regard to case. fuzz/http_headers_fuzz.cpp runs it on arbitrary bytes.

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace payments
