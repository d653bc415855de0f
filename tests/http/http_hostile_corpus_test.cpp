// A corpus of hostile requests, each sent as an independent client would send it (raw bytes on a
// socket of its own), one case per test, against the http_payments server (a child process,
// SQLite; label http). ctest runs the same binary once more against http_payments_async
// (PostgreSQL, label async): both servers must answer every case the same way.
//
// The cases: bodies announced and never sent (they must not hold the threads that answer
// others); framing a proxy and the server could read differently (RFC 9112 section 6.3:
// answered 400, or 501 for a transfer coding the server does not implement, and closed at once,
// never at the request's deadline); control bytes in field values (RFC 9110 section 5.5: 400,
// never a value cut at the NUL); a repeated Idempotency-Key (400 problem+json); a Date on every
// answer; HTTP/1.0 answers that close without announcing a keep-alive. Waits are bounded and
// generous; the request deadline is set well beyond them, so that an answer "at once" is told
// apart from one at the deadline.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <regex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "http_test_support.hpp"
#include "raw_socket.hpp"

namespace {

using namespace http_test;
using namespace std::chrono_literals;

const std::string kPayment = R"({"amount": 1250, "currency": "EUR"})";
// The request deadline the servers run with: far beyond every wait below.
constexpr const char* kDeadlineMs = "30000";
// How long a client waits for an answer that must come at once.
constexpr auto kAtOnce = 8s;

// What a raw client got: the bytes, the status of the first answer, and whether the server
// closed the connection after it.
struct Answer {
  std::string bytes;
  int status = 0;
  bool closed = false;

  // The number of answers (status lines) in the bytes.
  int answers() const {
    int n = 0;
    for (std::size_t at = bytes.find("HTTP/1."); at != std::string::npos;
         at = bytes.find("HTTP/1.", at + 1)) {
      if (at == 0 || bytes.compare(at - 2, 2, "\r\n") == 0) ++n;
    }
    return n;
  }
  // The value of header `name` in the first answer's head ("" when absent); names match in
  // any case.
  std::string header(const std::string& name) const {
    const std::string head = bytes.substr(0, bytes.find("\r\n\r\n"));
    const std::regex line("\r\n" + name + ":[ \t]*([^\r]*)", std::regex::icase);
    std::smatch m;
    return std::regex_search(head, m, line) ? m[1].str() : std::string{};
  }
  bool has_header(const std::string& name) const {
    const std::string head = bytes.substr(0, bytes.find("\r\n\r\n"));
    return std::regex_search(head, std::regex("\r\n" + name + ":", std::regex::icase));
  }
};

std::string describe(const Answer& a) { return a.bytes.substr(0, 400); }

// The server answered `status` and closed the connection after it.
void expect_refused(const Answer& a, int status) {
  EXPECT_EQ(a.status, status) << describe(a);
  EXPECT_TRUE(a.closed) << "the connection stays open after " << status;
}

int status_of(std::string_view bytes) {
  if (bytes.size() < 12 || bytes.substr(0, 7) != "HTTP/1.") return 0;
  return std::atoi(std::string(bytes.substr(9, 3)).c_str());
}

// A request head with these fields, then `body`.
std::string request(std::string_view start, const std::vector<std::string>& fields,
                    std::string_view body = {}) {
  std::string out(start);
  out += "\r\n";
  for (const auto& f : fields) out += f + "\r\n";
  out += "\r\n";
  out += body;
  return out;
}

std::string length_of(std::string_view body) {
  return "Content-Length: " + std::to_string(body.size());
}

class HostileCorpus : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kPg && (env("IDEM_TEST_PG_URI") == nullptr || env("IDEM_TEST_REDIS_URI") == nullptr)) {
      GTEST_SKIP()
          << "IDEM_TEST_PG_URI and IDEM_TEST_REDIS_URI are not set (scripts/test sets them)";
    }
    server_ = std::make_unique<Server>(
        backing_, std::vector<std::string>{"--request-timeout-ms", kDeadlineMs});
  }

  int port() const { return server_->port(); }

  // Sends `bytes` on a connection of its own, then reads until the server closes, or until
  // `wait` passes (a server that keeps the connection open after a whole answer is given
  // `settle` to send anything more).
  Answer send(const std::string& bytes, std::chrono::milliseconds wait = kAtOnce) {
    RawSocket s(port());
    Answer a;
    if (!s.connected() || !s.send(bytes)) return a;
    a.bytes = s.receive(wait, "\r\n\r\n");
    a.status = status_of(a.bytes);
    if (a.status != 0) {
      // The rest of the answer, and anything after it, until the server closes or goes quiet.
      a.bytes += s.receive(1500ms);
      a.closed = s.closed_by_peer();
    }
    return a;
  }

  // A bounded GET /health on a new connection of its own, as another user would send it.
  int health_status(std::chrono::seconds wait) {
    httplib::Client c("127.0.0.1", port());
    c.set_connection_timeout(wait);
    c.set_read_timeout(wait);
    c.set_write_timeout(wait);
    auto r = c.Get("/health");
    return r ? r->status : -1;
  }

  int pay(const std::string& principal, const std::string& key, std::chrono::seconds wait) {
    httplib::Client c("127.0.0.1", port());
    c.set_connection_timeout(wait);
    c.set_read_timeout(wait);
    c.set_write_timeout(wait);
    auto r = c.Post("/payments", headers(principal, key), kPayment, "application/json");
    return r ? r->status : -1;
  }

  // More connections than the server has threads (16 by default), each sending `head` and
  // then nothing: GET /health and a fresh payment are still answered, long before the
  // request deadline would free anything.
  void stalled_bodies_hold_no_thread(const std::string& framing) {
    std::vector<std::unique_ptr<RawSocket>> stalled;
    for (int i = 0; i < 48; ++i) {
      auto s = std::make_unique<RawSocket>(port());
      ASSERT_TRUE(s->connected());
      ASSERT_TRUE(s->send(
          request("POST /payments HTTP/1.1", {"Host: test", "Authorization: Bearer alice",
                                              "Idempotency-Key: k-stalled-" + std::to_string(i),
                                              "Content-Type: application/json", framing})));
      stalled.push_back(std::move(s));
    }
    std::this_thread::sleep_for(500ms);  // the server has read every head
    EXPECT_EQ(health_status(8s), 200) << "GET /health waits for the stalled bodies";
    EXPECT_EQ(pay("bob", "k-fresh", 8s), 201) << "a fresh payment waits for the stalled bodies";
    for (const auto& s : stalled) EXPECT_EQ(s->receive(0ms), "") << "a stalled body was answered";
    EXPECT_EQ(backing_.payments(), 1);
  }

  Backing backing_;
  std::unique_ptr<Server> server_;
};

// ---- Bodies announced and never sent --------------------------------------------------------

TEST_F(HostileCorpus, StalledChunkedBodiesHoldNoThread) {
  stalled_bodies_hold_no_thread("Transfer-Encoding: chunked");
}

TEST_F(HostileCorpus, StalledContentLengthBodiesHoldNoThread) {
  stalled_bodies_hold_no_thread("Content-Length: 500000");
}

// ---- Framing ------------------------------------------------------------------------------

// Two Content-Length fields that differ: a server that frames by one and a proxy by the other
// disagree on where the request ends; the rest of the body must never be run as a request of its
// own (here an inner POST /payments as another bearer).
TEST_F(HostileCorpus, TwoDifferentContentLengthsAre400AndTheRestIsNeverARequest) {
  const std::string inner =
      request("POST /payments HTTP/1.1",
              {"Host: test", "Authorization: Bearer mallory", "Idempotency-Key: k-inner",
               "Content-Type: application/json", length_of(kPayment)},
              kPayment);
  const std::string body = kPayment + inner;
  const Answer a =
      send(request("POST /payments HTTP/1.1",
                   {"Host: test", "Authorization: Bearer alice", "Idempotency-Key: k-outer",
                    "Content-Type: application/json", length_of(kPayment), length_of(body)},
                   body));
  EXPECT_EQ(a.status, 400) << describe(a);
  EXPECT_EQ(a.answers(), 1) << describe(a);
  EXPECT_TRUE(a.closed);
  EXPECT_EQ(backing_.payments(), 0);
}

TEST_F(HostileCorpus, AnUnknownTransferCodingIs501) {
  const Answer a = send(request(
      "POST /payments HTTP/1.1",
      {"Host: test", "Authorization: Bearer alice", "Idempotency-Key: k-xchunked",
       "Content-Type: application/json", "Transfer-Encoding: xchunked", length_of(kPayment)},
      kPayment));
  expect_refused(a, 501);
  EXPECT_EQ(backing_.payments(), 0);
}

TEST_F(HostileCorpus, ChunkedFollowedByAnotherCodingIsRefusedAtOnce) {
  const Answer a =
      send(request("POST /payments HTTP/1.1",
                   {"Host: test", "Authorization: Bearer alice", "Idempotency-Key: k-identity",
                    "Content-Type: application/json", "Transfer-Encoding: chunked, identity"},
                   "23\r\n" + kPayment + "\r\n0\r\n\r\n"));
  expect_refused(a, 501);
  EXPECT_EQ(backing_.payments(), 0);
}

TEST_F(HostileCorpus, AContentLengthWithAPlusSignIs400) {
  const Answer a = send(request(
      "POST /payments HTTP/1.1",
      {"Host: test", "Authorization: Bearer alice", "Idempotency-Key: k-plus",
       "Content-Type: application/json", "Content-Length: +" + std::to_string(kPayment.size())},
      kPayment));
  expect_refused(a, 400);
  EXPECT_EQ(backing_.payments(), 0);
}

TEST_F(HostileCorpus, ANegativeContentLengthIs400AtOnce) {
  const Answer a = send(request(
      "POST /payments HTTP/1.1",
      {"Host: test", "Authorization: Bearer alice", "Idempotency-Key: k-neg", "Content-Length: -1"},
      kPayment));
  expect_refused(a, 400);
}

TEST_F(HostileCorpus, ASpaceBeforeTheColonIs400AtOnce) {
  const Answer a =
      send(request("POST /payments HTTP/1.1",
                   {"Host: test", "Authorization: Bearer alice", "Idempotency-Key: k-space",
                    "Content-Length : " + std::to_string(kPayment.size())},
                   kPayment));
  expect_refused(a, 400);
  EXPECT_EQ(backing_.payments(), 0);
}

TEST_F(HostileCorpus, ANegativeChunkSizeIs400AtOnce) {
  const Answer a = send(request("POST /payments HTTP/1.1",
                                {"Host: test", "Authorization: Bearer alice",
                                 "Idempotency-Key: k-chunk", "Transfer-Encoding: chunked"},
                                "-23\r\n" + kPayment + "\r\n0\r\n\r\n"));
  expect_refused(a, 400);
  EXPECT_EQ(backing_.payments(), 0);
}

TEST_F(HostileCorpus, Http11WithoutHostIs400) {
  const Answer a = send(request("GET /health HTTP/1.1", {}));
  expect_refused(a, 400);
}

// ---- Control bytes in field values --------------------------------------------------------

// Two clients whose keys differ after a NUL: were the value cut there, the second would get the
// first one's payment replayed.
TEST_F(HostileCorpus, ANulInTheIdempotencyKeyIs400NotACutKey) {
  for (const char* rest : {"AAAA", "BBBB"}) {
    const Answer a = send(request("POST /payments HTTP/1.1",
                                  {"Host: test", "Authorization: Bearer alice",
                                   std::string("Idempotency-Key: X\0", 19) + rest,
                                   "Content-Type: application/json", length_of(kPayment)},
                                  kPayment));
    EXPECT_EQ(a.status, 400) << rest << ": " << describe(a);
    EXPECT_TRUE(a.closed) << rest;
  }
  EXPECT_EQ(backing_.payments(), 0);
}

TEST_F(HostileCorpus, ANulInAuthorizationIs400NotACutPrincipal) {
  const Answer a = send(request(
      "POST /payments HTTP/1.1",
      {"Host: test", std::string("Authorization: Bearer mallory\0-not-alice", 40),
       "Idempotency-Key: k-nul-bearer", "Content-Type: application/json", length_of(kPayment)},
      kPayment));
  expect_refused(a, 400);
  EXPECT_EQ(backing_.payments(), 0);
}

TEST_F(HostileCorpus, ACarriageReturnInAFieldValueIs400) {
  const Answer a = send(request("GET /health HTTP/1.1", {"Host: test", "X-Note: a\rb"}));
  expect_refused(a, 400);
}

TEST_F(HostileCorpus, AControlByteInAFieldValueIs400) {
  const Answer a = send(request("GET /health HTTP/1.1", {"Host: test",
                                                         "X-Note: a\x01"
                                                         "b"}));
  expect_refused(a, 400);
}

TEST_F(HostileCorpus, ADeleteByteInAFieldValueIs400) {
  const Answer a = send(request("GET /health HTTP/1.1", {"Host: test",
                                                         "X-Note: a\x7f"
                                                         "b"}));
  expect_refused(a, 400);
}

// ---- A repeated Idempotency-Key -----------------------------------------------------------

// The draft's field is one sf-string: two fields are a list, which is no key (never the first
// of them), whether they differ or not.
void expect_repeated_key_refused(const Answer& a) {
  EXPECT_EQ(a.status, 400) << describe(a);
  EXPECT_EQ(a.header("Content-Type"), "application/problem+json") << describe(a);
  EXPECT_NE(a.bytes.find("urn:idem:problem:key_invalid"), std::string::npos) << describe(a);
  EXPECT_NE(a.bytes.find("Idempotency-Key appears in more than one field"), std::string::npos)
      << describe(a);
}

std::string payment_with_keys(const std::string& first, const std::string& second) {
  return request(
      "POST /payments HTTP/1.1",
      {"Host: test", "Authorization: Bearer alice", "Idempotency-Key: " + first,
       "Idempotency-Key: " + second, "Content-Type: application/json", length_of(kPayment)},
      kPayment);
}

TEST_F(HostileCorpus, TwoIdempotencyKeyFieldsAre400SayingSo) {
  expect_repeated_key_refused(send(payment_with_keys("k-first", "k-second")));
  EXPECT_EQ(backing_.payments(), 0);
}

TEST_F(HostileCorpus, TheSameIdempotencyKeyTwiceIs400Too) {
  expect_repeated_key_refused(send(payment_with_keys("k-twice", "k-twice")));
  EXPECT_EQ(backing_.payments(), 0);
}

// ---- Date, and HTTP/1.0 --------------------------------------------------------------------

const std::regex kImfFixdate(
    R"((Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) )"
    R"(\d{4} \d\d:\d\d:\d\d GMT)");

TEST_F(HostileCorpus, ARouteAnswerCarriesADate) {
  const Answer a = send(request("GET /health HTTP/1.1", {"Host: test", "Connection: close"}));
  EXPECT_EQ(a.status, 200) << describe(a);
  EXPECT_TRUE(std::regex_match(a.header("Date"), kImfFixdate)) << describe(a);
}

TEST_F(HostileCorpus, ATransportRefusalCarriesADate) {
  const Answer a = send(
      request("POST /payments HTTP/1.1", {"Host: test", "Authorization: Bearer alice",
                                          "Idempotency-Key: k-big", "Content-Length: 99999999"}));
  EXPECT_EQ(a.status, 413) << describe(a);
  EXPECT_TRUE(std::regex_match(a.header("Date"), kImfFixdate)) << describe(a);
}

TEST_F(HostileCorpus, AnHttp10AnswerClosesWithoutAnnouncingKeepAlive) {
  const Answer a = send(request("GET /health HTTP/1.0", {}));
  EXPECT_EQ(a.status, 200) << describe(a);
  EXPECT_FALSE(a.has_header("Keep-Alive")) << describe(a);
  EXPECT_TRUE(a.closed);
}

}  // namespace
