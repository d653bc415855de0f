// The blocking transport's request reader (examples/http_payments/transport/request_reader.hpp):
// Boost.Beast's parser fed the bytes as they come, under the rules both payments servers add
// (request_rules.hpp). A request is handed over only whole; every refusal names its status.

#include "transport/request_reader.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace {

using transport::RequestReader;
using Step = RequestReader::Step;

transport::TransportSettings settings() {
  transport::TransportSettings s;
  s.body_limit = 1000;
  s.head_limit = 2048;
  return s;
}

// Feeds `bytes` `piece` bytes at a time; the last step.
Step feed(RequestReader& reader, std::string& in, const std::string& bytes, std::size_t piece) {
  Step step = Step::more;
  for (std::size_t at = 0; at < bytes.size() && step == Step::more; at += piece) {
    in += bytes.substr(at, piece);
    step = reader.read(in);
  }
  return step;
}

int refusal_status(const std::string& bytes) {
  const transport::TransportSettings s = settings();
  RequestReader reader(s);
  std::string in;
  const Step step = feed(reader, in, bytes, bytes.size());
  return step == Step::refused ? reader.refusal().status : 0;
}

TEST(RequestReader, AWholeRequestInPiecesIsHandedOverOnceWhole) {
  const transport::TransportSettings s = settings();
  const std::string request =
      "POST /payments?x=1 HTTP/1.1\r\nHost: t\r\nIdempotency-Key: k\r\nContent-Length: 5\r\n\r\n"
      "hello";
  for (const std::size_t piece : {std::size_t{1}, std::size_t{7}, request.size()}) {
    RequestReader reader(s);
    std::string in;
    std::string next = "GET /health HTTP/1.1\r\nHost: t\r\n\r\n";
    in.clear();
    Step step = Step::more;
    for (std::size_t at = 0; at < request.size(); at += piece) {
      EXPECT_EQ(step, Step::more) << piece;
      in += request.substr(at, piece);
      if (at + piece >= request.size()) in += next;  // the next request, pipelined
      step = reader.read(in);
    }
    ASSERT_EQ(step, Step::done) << piece;
    EXPECT_EQ(reader.method(), "POST");
    EXPECT_EQ(reader.target(), "/payments?x=1");
    EXPECT_EQ(reader.version(), 11U);
    EXPECT_TRUE(reader.keep_alive());
    std::vector<std::pair<std::string, std::string>> fields;
    reader.each_field([&](std::string_view n, std::string_view v) { fields.emplace_back(n, v); });
    EXPECT_EQ(fields.size(), 3U);
    EXPECT_EQ(reader.take_body(), "hello");
    EXPECT_EQ(in, next) << "the next request stays for the next read";
    reader.next();
    EXPECT_EQ(reader.read(in), Step::done);
    EXPECT_EQ(reader.target(), "/health");
    EXPECT_TRUE(in.empty());
  }
}

TEST(RequestReader, AChunkedBodyIsReadWholeFromItsPieces) {
  const transport::TransportSettings s = settings();
  RequestReader reader(s);
  std::string in;
  EXPECT_EQ(feed(reader, in,
                 "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                 "3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\n\r\n",
                 3),
            Step::done);
  EXPECT_EQ(reader.take_body(), "abcde");
}

TEST(RequestReader, AHeadWithoutItsBodyIsNotHandedOver) {
  const transport::TransportSettings s = settings();
  for (const std::string framing : {"Content-Length: 500", "Transfer-Encoding: chunked"}) {
    RequestReader reader(s);
    std::string in = "POST / HTTP/1.1\r\nHost: t\r\n" + framing + "\r\n\r\n";
    EXPECT_EQ(reader.read(in), Step::more) << framing;
    EXPECT_TRUE(reader.started());
    EXPECT_TRUE(in.empty());
  }
}

TEST(RequestReader, ExpectContinueIsAskedForOnceBeforeTheBody) {
  const transport::TransportSettings s = settings();
  RequestReader reader(s);
  std::string in =
      "POST / HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
  EXPECT_EQ(reader.read(in), Step::more);
  EXPECT_TRUE(reader.take_continue());
  EXPECT_FALSE(reader.take_continue());
  in = "ok";
  EXPECT_EQ(reader.read(in), Step::done);
}

TEST(RequestReader, KeepAliveFollowsTheVersionAndConnection) {
  const transport::TransportSettings s = settings();
  auto keeps = [&](const std::string& head) {
    RequestReader reader(s);
    std::string in = head;
    EXPECT_EQ(reader.read(in), Step::done) << head;
    return reader.keep_alive();
  };
  EXPECT_TRUE(keeps("GET / HTTP/1.1\r\nHost: t\r\n\r\n"));
  EXPECT_FALSE(keeps("GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"));
  EXPECT_FALSE(keeps("GET / HTTP/1.0\r\n\r\n"));
  EXPECT_TRUE(keeps("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
}

// Framing a proxy could read otherwise: refused, whatever comes after.
TEST(RequestReader, AmbiguousFramingIsRefused) {
  EXPECT_EQ(refusal_status("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n"
                           "Content-Length: 5\r\n\r\nabcde"),
            400);
  EXPECT_EQ(refusal_status("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: +3\r\n\r\nabc"), 400);
  EXPECT_EQ(refusal_status("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: -1\r\n\r\n"), 400);
  EXPECT_EQ(refusal_status("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
                           "Content-Length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),
            400);
  EXPECT_EQ(refusal_status("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                           "-3\r\nabc\r\n0\r\n\r\n"),
            400);
  EXPECT_EQ(refusal_status("POST / HTTP/1.1\r\nHost : t\r\n\r\n"), 400);
  EXPECT_EQ(refusal_status("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 400);
}

TEST(RequestReader, ATransferCodingOtherThanChunkedIs501) {
  EXPECT_EQ(refusal_status("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: xchunked\r\n"
                           "Content-Length: 3\r\n\r\nabc"),
            501);
  EXPECT_EQ(refusal_status("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, identity"
                           "\r\n\r\n0\r\n\r\n"),
            501);
  EXPECT_EQ(refusal_status("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked"
                           "\r\n\r\n0\r\n\r\n"),
            501);
}

TEST(RequestReader, Http11NeedsExactlyOneHost) {
  EXPECT_EQ(refusal_status("GET / HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(refusal_status("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
  EXPECT_EQ(refusal_status("GET / HTTP/1.0\r\n\r\n"), 0);
}

TEST(RequestReader, ControlBytesInAFieldValueAreRefusedWhole) {
  EXPECT_EQ(
      refusal_status(std::string("GET / HTTP/1.1\r\nHost: t\r\nIdempotency-Key: X\0A\r\n\r\n", 49)),
      400);
  EXPECT_EQ(refusal_status("GET / HTTP/1.1\r\nHost: t\r\nX: a\x01\r\n\r\n"), 400);
  EXPECT_EQ(refusal_status("GET / HTTP/1.1\r\nHost: t\r\nX: a\x7f\r\n\r\n"), 400);
  EXPECT_EQ(refusal_status("GET / HTTP/1.1\r\nHost: t\r\nX: a\rb\r\n\r\n"), 400);
  EXPECT_EQ(refusal_status("GET / HTTP/1.1\r\nHost: t\r\nX: a\tb\r\n\r\n"), 0);
}

TEST(RequestReader, LimitsAreKeptBeforeTheBodyIsRead) {
  // Announced over the limit: refused from the head, none of the body read.
  EXPECT_EQ(refusal_status("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1001\r\n\r\n"), 413);
  EXPECT_EQ(refusal_status("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 99999999999999999999"
                           "\r\n\r\n"),
            400);
  // Chunked: refused as it grows past the limit.
  EXPECT_EQ(refusal_status("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                           "3e9\r\n" +
                           std::string(1001, 'x') + "\r\n0\r\n\r\n"),
            413);
  EXPECT_EQ(
      refusal_status("GET / HTTP/1.1\r\nHost: t\r\nX: " + std::string(3000, 'x') + "\r\n\r\n"),
      431);
  // A head that never ends is refused once it passes the limit, not buffered on.
  const transport::TransportSettings s = settings();
  RequestReader reader(s);
  std::string in;
  EXPECT_EQ(feed(reader, in, "GET / HTTP/1.1\r\n" + std::string(10000, 'h'), 100), Step::refused);
  EXPECT_EQ(reader.refusal().status, 431);
}

}  // namespace
