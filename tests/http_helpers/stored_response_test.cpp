// idem/http/stored_response.hpp: a stored HTTP response keeps the status, the allowed headers and
// the body, so that a replay through the guard is the whole response; bytes in any other form
// decode to errc::record_corrupt.

#include "idem/http/stored_response.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "idem/idem.hpp"

namespace idem::http {
namespace {

template <class F>
errc error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return static_cast<errc>(e.code().value());
  }
  ADD_FAILURE() << "no idem::Error thrown";
  return errc::key_invalid;
}

TEST(StoredResponse, KeepsOnlyTheAllowedHeadersWhateverTheirCase) {
  const std::multimap<std::string, std::string> headers{{"location", "/payments/pay_1"},
                                                        {"ETag", "\"v1\""},
                                                        {"Set-Cookie", "session=secret"},
                                                        {"Date", "Thu, 03 Dec 2026 14:00:00 GMT"},
                                                        {"Content-Type", "application/json"}};
  const StoredResponse kept = keep_response(201, "{}", headers);
  EXPECT_EQ(kept.status, 201);
  EXPECT_EQ(kept.body, "{}");
  EXPECT_EQ(kept.headers.size(), 3U);
  EXPECT_EQ(kept.header("Location"), "/payments/pay_1");
  EXPECT_EQ(kept.header("etag"), "\"v1\"");
  EXPECT_EQ(kept.header("Content-Type"), "application/json");
  EXPECT_EQ(kept.header("Set-Cookie"), "");
  EXPECT_EQ(kept.header("Date"), "");

  const std::vector<std::string_view> only_location{"Location"};
  EXPECT_EQ(keep_response(201, "{}", headers, only_location).headers.size(), 1U);
}

TEST(StoredResponse, RoundTripsExactly) {
  const StoredResponse r{201,
                         {{"Location", "/payments/pay_1"}, {"ETag", "W/\"a: b\""}, {"X-Empty", ""}},
                         std::string("{\"id\":1}\n\n\0binary", 17)};
  EXPECT_EQ(codec<StoredResponse>::decode(codec<StoredResponse>::encode(r)), r);
  const StoredResponse bare{204, {}, ""};
  EXPECT_EQ(codec<StoredResponse>::decode(codec<StoredResponse>::encode(bare)), bare);
  EXPECT_EQ(codec<StoredResponse>::encode(bare), "idem-http/1 204\n\n");
}

TEST(StoredResponse, BytesInAnyOtherFormAreRecordCorrupt) {
  for (const std::string& bad :
       {std::string(), std::string("201\n\n{}"), std::string("idem-http/1 201"),
        std::string("idem-http/1 20\n\n"), std::string("idem-http/1 2010\n\n"),
        std::string("idem-http/1 099\n\n"), std::string("idem-http/1 600\n\n"),
        std::string("idem-http/1 -01\n\n"), std::string("idem-http/1 201\nLocation /x\n\n"),
        std::string("idem-http/1 201\nLocation: /x\n"),
        std::string("idem-http/1 201\nBad Name: x\n\n"), std::string("idem-http/1 201\n: x\n\n"),
        std::string("idem-http/2 201\n\n")}) {
    EXPECT_EQ(error_of([&] { (void)codec<StoredResponse>::decode(bad); }), errc::record_corrupt)
        << bad;
  }
}

TEST(StoredResponse, WhatCouldNotBeReadBackIsNotEncoded) {
  for (const StoredResponse& bad :
       {StoredResponse{99, {}, ""}, StoredResponse{600, {}, ""},
        StoredResponse{200, {{"X", "a\r\nSet-Cookie: injected"}}, ""},
        StoredResponse{200, {{"Bad Name", "x"}}, ""}, StoredResponse{200, {{"", "x"}}, ""}}) {
    EXPECT_EQ(error_of([&] { (void)codec<StoredResponse>::encode(bad); }), errc::record_corrupt);
  }
}

TEST(StoredResponse, AReplayThroughTheGuardIsTheWholeResponse) {
  MemoryStore store;
  IdempotencyGuard guard{store};
  int runs = 0;
  auto pay = [&] {
    return guard.execute(Key{"k"}, "amount=1", [&] {
      ++runs;
      return StoredResponse{
          201, {{"Location", "/payments/pay_1"}, {"ETag", "\"1\""}}, "{\"id\":1}"};
    });
  };
  const Outcome<StoredResponse> first = pay();
  const Outcome<StoredResponse> again = pay();
  ASSERT_TRUE(first);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(again.value(), first.value());
  EXPECT_EQ(again.value().header("location"), "/payments/pay_1");
}

}  // namespace
}  // namespace idem::http
