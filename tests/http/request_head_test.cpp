// The transport's view of a request head (examples/http_payments/transport/request_head.hpp):
// where it ends, a header's value, and how much body to wait for before a thread takes it.

#include "transport/request_head.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

using transport::body_to_wait_for;
using transport::head_end;
using transport::header_value;

const std::string kHead =
    "POST /payments HTTP/1.1\r\nHost: x\r\ncontent-length:  42 \r\nX-Empty:\r\n\r\n";

TEST(RequestHead, EndsAfterTheBlankLine) {
  EXPECT_EQ(head_end(kHead), kHead.size());
  EXPECT_EQ(head_end(kHead + "body"), kHead.size());
  EXPECT_EQ(head_end("GET / HTTP/1.1\r\nHost: x\r\n"), std::string::npos);
  EXPECT_EQ(head_end(""), std::string::npos);
}

TEST(RequestHead, HeaderValuesIgnoreCaseAndBlanks) {
  EXPECT_EQ(header_value(kHead, "Content-Length"), "42");
  EXPECT_EQ(header_value(kHead, "HOST"), "x");
  EXPECT_EQ(header_value(kHead, "X-Empty"), "");
  EXPECT_EQ(header_value(kHead, "Expect"), std::nullopt);
  // The request line is not a header, whatever it holds.
  EXPECT_EQ(header_value("Host: y /x HTTP/1.1\r\n\r\n", "Host"), std::nullopt);
}

TEST(RequestHead, OnlySmallAnnouncedBodiesAreWaitedFor) {
  EXPECT_EQ(body_to_wait_for(kHead, 1000), 42u);
  EXPECT_EQ(body_to_wait_for(kHead, 41), 0u);  // large: the thread reads it
  EXPECT_EQ(body_to_wait_for("GET / HTTP/1.1\r\nHost: x\r\n\r\n", 1000), 0u);
  // A client that waits for 100 Continue sends nothing until it is answered.
  EXPECT_EQ(body_to_wait_for("POST / HTTP/1.1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
                             1000),
            0u);
  EXPECT_EQ(body_to_wait_for(
                "POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 1000),
            0u);
  EXPECT_EQ(body_to_wait_for("POST / HTTP/1.1\r\nContent-Length: 5x\r\n\r\n", 1000), 0u);
}

}  // namespace
