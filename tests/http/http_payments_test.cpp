// End-to-end tests of examples/http_payments over real HTTP on 127.0.0.1: the server runs as a
// child process (so it can be SIGKILLed), clients are real threads with their own connections.
//
// Built twice: with SQLite and in-memory gateway and tokens (label http, sqlite), and with
// IDEM_HTTP_TEST_PG defined: PostgreSQL and Redis from IDEM_TEST_PG_URI / IDEM_TEST_REDIS_URI
// (labels http, postgres, redis; unset: skip; set but unreachable: fail).

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "http_test_support.hpp"
#ifdef IDEM_HTTP_PAYMENTS_PROMETHEUS
#include "admin/prometheus_text.hpp"
#endif
#ifdef IDEM_HTTP_TEST_PG
#include "sql/pg_relay.hpp"
#endif

namespace {

using namespace http_test;
using namespace std::chrono_literals;

class HttpPayments : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kPg && (env("IDEM_TEST_PG_URI") == nullptr || env("IDEM_TEST_REDIS_URI") == nullptr)) {
      GTEST_SKIP()
          << "IDEM_TEST_PG_URI and IDEM_TEST_REDIS_URI are not set (scripts/test sets them)";
    }
  }
  Backing backing;
};

TEST_F(HttpPayments, StatusCodesHeadersAndPrincipals) {
  Server server(backing, {"--delay-ms", "300"});
  httplib::Client c("127.0.0.1", server.port());
  c.set_read_timeout(10, 0);

  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);

  auto no_auth = c.Post("/payments", httplib::Headers{{"Idempotency-Key", "k"}}, body_of(1),
                        "application/json");
  ASSERT_TRUE(no_auth);
  EXPECT_EQ(no_auth->status, 401);

  // No key, or one the service cannot take (a broken quoted string, more than 255 bytes): 400
  // key_invalid before any store sees it. A quoted key is the key inside the quotes.
  for (const std::string& bad :
       {std::string(), std::string("\"unterminated"), std::string(300, 'k')}) {
    auto refused = c.Post("/payments", headers("alice", bad), body_of(1), "application/json");
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 400) << bad;
    EXPECT_EQ(refused->get_header_value("Content-Type"), "application/problem+json");
    const json problem = json::parse(refused->body);
    EXPECT_EQ(problem["status"], 400) << bad;
    EXPECT_EQ(problem["type"], "urn:idem:problem:key_invalid") << bad;
  }
  auto quoted =
      c.Post("/payments", headers("alice", "\"k-quoted\""), body_of(1), "application/json");
  ASSERT_TRUE(quoted);
  EXPECT_EQ(quoted->status, 201);
  auto bare = c.Post("/payments", headers("alice", "k-quoted"), body_of(1), "application/json");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->status, 201);
  EXPECT_EQ(bare->get_header_value("Idempotent-Replayed"), "true");
  EXPECT_EQ(bare->body, quoted->body);

  auto bad_body = c.Post("/payments", headers("alice", "k-bad"), "{", "application/json");
  ASSERT_TRUE(bad_body);
  EXPECT_EQ(bad_body->status, 400);

  // In flight: whichever of two concurrent requests for k-1 arrives first holds it for 300 ms;
  // the other, sent 100 ms later, meets it in flight: 409. (Under heavy load the second may
  // arrive first; then the roles swap, which the checks allow.)
  std::optional<httplib::Response> early;
  std::thread holder([&] {
    httplib::Client c2("127.0.0.1", server.port());
    c2.set_read_timeout(10, 0);
    auto r = c2.Post("/payments", headers("alice", "k-1"), body_of(1), "application/json");
    if (r) early = *r;
  });
  std::this_thread::sleep_for(100ms);
  auto late = c.Post("/payments", headers("alice", "k-1"), body_of(1), "application/json");
  holder.join();
  ASSERT_TRUE(early);
  ASSERT_TRUE(late);
  const bool early_won = early->status == 201;
  const httplib::Response* first = early_won ? &*early : &late.value();
  const httplib::Response* busy = early_won ? &late.value() : &*early;
  ASSERT_EQ(first->status, 201) << first->body;
  EXPECT_FALSE(first->has_header("Idempotent-Replayed"));
  EXPECT_EQ(busy->status, 409) << busy->body;
  EXPECT_EQ(busy->get_header_value("Content-Type"), "application/problem+json");
  // Retry-After: when the holder is likely done, from the guard's recent handler durations (the
  // two payments above took 300 ms each), rounded up to a second; not the 30 s of its lease.
  EXPECT_EQ(busy->get_header_value("Retry-After"), "1");
  const json paid = json::parse(first->body);
  ASSERT_TRUE(paid.contains("id"));
  EXPECT_EQ(paid["amount"], 101);
  EXPECT_EQ(first->get_header_value("Location"), "/payments/" + paid["id"].get<std::string>());
  EXPECT_EQ(first->get_header_value("Content-Type"), "application/json");

  // A repeat is the whole first response (status, Location, Content-Type, body), marked replayed;
  // the payload with other whitespace and key order is the same payment. The key may come with
  // sf-string parameters, which are ignored.
  auto repeat = c.Post("/payments", headers("alice", "\"k-1\";attempt=2"),
                       R"({ "currency":"EUR",   "amount": 101 })", "application/json");
  ASSERT_TRUE(repeat);
  EXPECT_EQ(repeat->status, 201);
  EXPECT_EQ(repeat->body, first->body);
  EXPECT_EQ(repeat->get_header_value("Location"), first->get_header_value("Location"));
  EXPECT_EQ(repeat->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(repeat->get_header_value("Idempotent-Replayed"), "true");

  auto mismatch = c.Post("/payments", headers("alice", "k-1"), body_of(2), "application/json");
  ASSERT_TRUE(mismatch);
  EXPECT_EQ(mismatch->status, 422);
  EXPECT_EQ(mismatch->get_header_value("Content-Type"), "application/problem+json");

  // Bob's k-1 is his own payment.
  auto bobs = c.Post("/payments", headers("bob", "k-1"), body_of(1), "application/json");
  ASSERT_TRUE(bobs);
  EXPECT_EQ(bobs->status, 201);
  EXPECT_FALSE(bobs->has_header("Idempotent-Replayed"));
  EXPECT_NE(json::parse(bobs->body)["id"], paid["id"]);

  auto mine = c.Get("/payments/" + paid["id"].get<std::string>(), headers("alice", ""));
  ASSERT_TRUE(mine);
  EXPECT_EQ(mine->status, 200);
  EXPECT_EQ(json::parse(mine->body)["id"], paid["id"]);
  auto not_bobs = c.Get("/payments/" + paid["id"].get<std::string>(), headers("bob", ""));
  ASSERT_TRUE(not_bobs);
  EXPECT_EQ(not_bobs->status, 404);

  // One-time tokens: a forged one is 400; an issued one pays once; reused for another key it
  // replays the payment it paid for, to its own bearer only.
  auto forged = c.Post("/payments",
                       httplib::Headers{{"Authorization", "Bearer alice"},
                                        {"Idempotency-Key", "k-2"},
                                        {"Payment-Token", "AAAAAAAAAAAAAAAAAAAAAA"}},
                       body_of(3), "application/json");
  ASSERT_TRUE(forged);
  EXPECT_EQ(forged->status, 400);
  auto issued = c.Get("/tokens");
  ASSERT_TRUE(issued);
  ASSERT_EQ(issued->status, 201);
  const std::string token = json::parse(issued->body)["token"];
  auto with_token = [&](const std::string& key) {
    return c.Post(
        "/payments",
        httplib::Headers{
            {"Authorization", "Bearer alice"}, {"Idempotency-Key", key}, {"Payment-Token", token}},
        body_of(3), "application/json");
  };
  auto by_token = with_token("k-2");
  ASSERT_TRUE(by_token);
  EXPECT_EQ(by_token->status, 201);
  auto token_again = with_token("k-3");
  ASSERT_TRUE(token_again);
  EXPECT_EQ(token_again->status, 201);
  EXPECT_EQ(token_again->body, by_token->body);
  EXPECT_EQ(token_again->get_header_value("Idempotent-Replayed"), "true");
  // Another bearer presenting alice's token, with a key of its own, never gets her payment.
  auto bobs_try = c.Post(
      "/payments",
      httplib::Headers{
          {"Authorization", "Bearer bob"}, {"Idempotency-Key", "k-2"}, {"Payment-Token", token}},
      body_of(3), "application/json");
  ASSERT_TRUE(bobs_try);
  EXPECT_EQ(bobs_try->status, 400);
  EXPECT_NE(bobs_try->body, by_token->body);
  EXPECT_EQ(bobs_try->get_header_value("Idempotent-Replayed"), "");

  EXPECT_EQ(backing.payments(), 4);  // alice k-1, alice k-quoted, bob k-1, alice k-2
  EXPECT_EQ(backing.outbox(), 4);
}

// Tenants apart through the HTTP face: bearers whose names collide (a prefix of another, a name
// and key that concatenate to another pair's) send the same Idempotency-Key. None gets another's
// payment replayed, a 422 for another's body or a 409 for another's payment in flight, nor reads
// another's payment; the record store (through its admin) holds one record per bearer and key.
TEST_F(HttpPayments, BearersWithTheSameKeyNeverMeetTheirRecords) {
  Server server(backing, {"--delay-ms", "300"});
  httplib::Client c("127.0.0.1", server.port());
  c.set_read_timeout(10, 0);
  struct Sent {
    std::string bearer;
    std::string key;
    int amount;
    std::string body;  // the 201's
  };
  std::vector<Sent> sent{{"alice", "order-1", 1, {}},  {"alic", "order-1", 2, {}},
                         {"alice2", "order-1", 3, {}}, {"alic", "eorder-1", 4, {}},
                         {"a", "liceorder-1", 5, {}},  {"alice:", "order-1", 6, {}}};
  // While alice's first payment is in flight (300 ms), every other bearer pays with the same key
  // and another body: a 201 of its own, never a 409 or a 422.
  std::optional<httplib::Result> alices;
  std::thread holder([&] {
    httplib::Client own("127.0.0.1", server.port());
    own.set_read_timeout(10, 0);
    alices.emplace(own.Post("/payments", headers(sent[0].bearer, sent[0].key),
                            body_of(sent[0].amount), "application/json"));
  });
  std::this_thread::sleep_for(100ms);
  for (std::size_t i = 1; i < sent.size(); ++i) {
    auto paid = c.Post("/payments", headers(sent[i].bearer, sent[i].key), body_of(sent[i].amount),
                       "application/json");
    ASSERT_TRUE(paid);
    ASSERT_EQ(paid->status, 201) << sent[i].bearer << ": " << paid->body;
    EXPECT_FALSE(paid->has_header("Idempotent-Replayed")) << sent[i].bearer;
    EXPECT_EQ(json::parse(paid->body)["amount"], 100 + sent[i].amount) << sent[i].bearer;
    sent[i].body = paid->body;
  }
  holder.join();
  ASSERT_TRUE(alices && *alices);
  ASSERT_EQ((*alices)->status, 201) << (*alices)->body;
  sent[0].body = (*alices)->body;
  // Each repeat replays the bearer's own payment.
  for (const Sent& s : sent) {
    auto again =
        c.Post("/payments", headers(s.bearer, s.key), body_of(s.amount), "application/json");
    ASSERT_TRUE(again);
    EXPECT_EQ(again->status, 201) << s.bearer;
    EXPECT_EQ(again->get_header_value("Idempotent-Replayed"), "true") << s.bearer;
    EXPECT_EQ(again->body, s.body) << s.bearer << " got another's payment";
  }
  // A payment is read back by its bearer only.
  const std::string alices_payment =
      "/payments/" + json::parse(sent[0].body)["id"].get<std::string>();
  for (const std::string& other : {"alic", "alice2", "ali", "alice:"}) {
    auto hidden = c.Get(alices_payment, headers(other, ""));
    ASSERT_TRUE(hidden);
    EXPECT_EQ(hidden->status, 404) << other;
  }
  EXPECT_EQ(backing.payments(), static_cast<long long>(sent.size()));
  EXPECT_EQ(backing.distinct_keys(), static_cast<long long>(sent.size()));
  // The record store holds each bearer's record under its own principal; a bearer with no
  // payment under the key finds, releases and forgets nothing of the others'.
  const std::unique_ptr<idem::admin::Admin> admin = backing.record_admin();
  for (const Sent& s : sent) {
    const auto seen = admin->inspect("payments", idem::Key{s.key, s.bearer});
    ASSERT_TRUE(seen) << seen.failure().describe();
    ASSERT_TRUE(seen.value()) << s.bearer;
    EXPECT_EQ(seen.value()->principal, s.bearer);
    EXPECT_EQ(seen.value()->state, idem::admin::State::completed) << s.bearer;
  }
  const idem::Key stranger{"order-1", "ali"};
  const auto none = admin->inspect("payments", stranger);
  ASSERT_TRUE(none) << none.failure().describe();
  EXPECT_FALSE(none.value());
  const auto released = admin->release("payments", stranger);
  ASSERT_TRUE(released) << released.failure().describe();
  EXPECT_FALSE(released->changed);
  const auto forgotten = admin->forget("payments", stranger);
  ASSERT_TRUE(forgotten) << forgotten.failure().describe();
  EXPECT_FALSE(forgotten->changed);
  EXPECT_EQ(backing.payments(), static_cast<long long>(sent.size()));
}

// Clients that resend payments until each has a 201, over a server that may move (restart).
struct Fleet {
  static constexpr int kPayments = 200;
  std::atomic<int> port{0};
  std::mutex mutex;
  std::map<int, std::vector<std::string>> answers;  // payment -> every 201 body seen
  std::atomic<int> requests{0};
  std::atomic<int> completed{0};

  // Each payment is sent 1 to 4 times, by random clients in random order, with jitter; each
  // send repeats on 409, 503, 504 or a broken connection until it gets a 201.
  void run(int clients) {
    std::vector<int> work;
    std::mt19937 rng(42);
    for (int i = 0; i < kPayments; ++i) {
      const int copies = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < copies; ++k) work.push_back(i);
    }
    std::shuffle(work.begin(), work.end(), rng);
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < clients; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 jitter(static_cast<unsigned>(t));
        for (std::size_t j; (j = next.fetch_add(1)) < work.size();) {
          std::this_thread::sleep_for(std::chrono::microseconds(jitter() % 2000));
          send(work[j], jitter);
        }
      });
    }
    for (auto& th : threads) th.join();
  }

  void send(int i, std::mt19937& jitter) {
    for (int attempt = 0; attempt < 3000; ++attempt) {
      httplib::Client c("127.0.0.1", port.load());
      c.set_connection_timeout(1, 0);
      c.set_read_timeout(10, 0);
      requests.fetch_add(1);
      auto r = c.Post("/payments", headers("client", "pay-" + std::to_string(i)), body_of(i),
                      "application/json");
      if (r && r->status == 201) {
        std::lock_guard lock(mutex);
        answers[i].push_back(r->body);
        completed.fetch_add(1);
        return;
      }
      if (r && r->status != 409 && r->status != 503 && r->status != 504) {
        ADD_FAILURE() << "payment " << i << ": HTTP " << r->status << " " << r->body;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1 + jitter() % 10));
    }
    ADD_FAILURE() << "payment " << i << " never got a 201";
  }

  void expect_each_paid_once_with_identical_answers() {
    ASSERT_EQ(answers.size(), static_cast<std::size_t>(kPayments));
    for (const auto& [i, bodies] : answers) {
      for (const auto& b : bodies) EXPECT_EQ(b, bodies.front()) << "payment " << i;
      EXPECT_EQ(json::parse(bodies.front())["amount"], 100 + i);
    }
  }
};

#ifdef IDEM_HTTP_PAYMENTS_PROMETHEUS
// GET /metrics, scraped over HTTP after one payment and its replay, is the Prometheus text
// format, counts both calls at the record layer and has the record store's own figures.
// A duplicate of a slow payment is told to come back when the holder is likely done: 2.5 s
// payments, so Retry-After: 3, not the 30 s left on the gateway's lease (nor 1, which would send
// it back to a 409). With no payment finished yet there is no estimate: the lease left.
TEST_F(HttpPayments, ADuplicateOfASlowPaymentIsToldWhenTheHolderIsLikelyDone) {
  Server server(backing, {"--delay-ms", "2500"});
  httplib::Client c("127.0.0.1", server.port());
  c.set_read_timeout(20, 0);
  auto warm = c.Post("/payments", headers("alice", "k-warm"), body_of(1), "application/json");
  ASSERT_TRUE(warm);
  ASSERT_EQ(warm->status, 201);
  std::optional<httplib::Result> early;
  std::thread holder([&] {
    httplib::Client own("127.0.0.1", server.port());
    own.set_read_timeout(20, 0);
    early.emplace(
        own.Post("/payments", headers("alice", "k-slow"), body_of(2), "application/json"));
  });
  std::this_thread::sleep_for(500ms);
  auto late = c.Post("/payments", headers("alice", "k-slow"), body_of(2), "application/json");
  holder.join();
  ASSERT_TRUE(late);
  ASSERT_TRUE(early && *early);
  const httplib::Response& busy = (*early)->status == 409 ? **early : *late;
  EXPECT_EQ(busy.status, 409) << busy.body;
  EXPECT_EQ(busy.get_header_value("Retry-After"), "3");
}

TEST_F(HttpPayments, MetricsScrapeIsPrometheusTextFormat) {
  Server server(backing, {});
  httplib::Client c("127.0.0.1", server.port());
  c.set_read_timeout(10, 0);
  for (int i = 0; i < 2; ++i) {
    auto paid = c.Post("/payments", headers("alice", "k-metrics"), body_of(1), "application/json");
    ASSERT_TRUE(paid);
    ASSERT_EQ(paid->status, 201);
  }
  auto scraped = c.Get("/metrics");
  ASSERT_TRUE(scraped);
  EXPECT_EQ(scraped->status, 200);
  EXPECT_EQ(scraped->get_header_value("Content-Type"), "text/plain; version=0.0.4");
  std::string why;
  EXPECT_TRUE(idem::test::valid_prometheus_text(scraped->body, why)) << why;
  EXPECT_NE(scraped->body.find(
                R"(idem_events_total{event="executed",scope="payments",store="layered"} 1)"),
            std::string::npos)
      << scraped->body;
  // The record store's own figures, read at the scrape: its pool opened a connection.
  const std::regex opened(
      R"re(idem_store_pool_events_total\{event="opened",name="records",pool="primary",)re"
      R"re(store="(sqlite|postgres)"\} [1-9])re");
  EXPECT_TRUE(std::regex_search(scraped->body, opened)) << scraped->body;
}
#endif

TEST_F(HttpPayments, ThirtyTwoClientsResendingTwoHundredPaymentsPayEachOnce) {
  Server server(backing);
  Fleet fleet;
  fleet.port = server.port();
  fleet.run(32);
  fleet.expect_each_paid_once_with_identical_answers();
  EXPECT_GT(fleet.completed.load(), Fleet::kPayments) << "some payments were resent";
  EXPECT_EQ(backing.payments(), Fleet::kPayments);
  EXPECT_EQ(backing.distinct_keys(), Fleet::kPayments);
  EXPECT_EQ(backing.outbox(), Fleet::kPayments);
}

TEST_F(HttpPayments, ServerKilledMidRunLosesNothingAndRepeatsNothing) {
  auto server = std::make_unique<Server>(
      backing, std::vector<std::string>{"--delay-ms", "3", "--lease-ms", "1000"});
  Fleet fleet;
  fleet.port = server->port();
  std::thread clients([&] { fleet.run(16); });
  // Kill the server once some payments are done and others are in flight; restart it on the
  // same database. The clients follow it to its new port.
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (fleet.completed.load() < Fleet::kPayments / 3 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(2ms);
  }
  server->stop(SIGKILL);
  const int done_before_kill = fleet.completed.load();
  std::map<int, std::string> seen_before;
  {
    std::lock_guard lock(fleet.mutex);
    for (const auto& [i, bodies] : fleet.answers) seen_before[i] = bodies.front();
  }
  std::this_thread::sleep_for(100ms);
  server = std::make_unique<Server>(
      backing, std::vector<std::string>{"--delay-ms", "3", "--lease-ms", "1000"});
  fleet.port = server->port();
  clients.join();

  EXPECT_GT(done_before_kill, 0);
  EXPECT_LT(done_before_kill, fleet.completed.load());
  fleet.expect_each_paid_once_with_identical_answers();
  for (const auto& [i, body] : seen_before) {
    EXPECT_EQ(fleet.answers[i].back(), body) << "payment " << i << " changed across the restart";
  }
  EXPECT_EQ(backing.payments(), Fleet::kPayments);
  EXPECT_EQ(backing.distinct_keys(), Fleet::kPayments);
  EXPECT_EQ(backing.outbox(), Fleet::kPayments);
}

#ifdef IDEM_HTTP_TEST_PG
// The payment's transaction reaches PostgreSQL, which commits it, and every reply is lost (the
// COMMIT's, then those of the reads that look for it): the service cannot say whether the
// payment is recorded, so it answers 504 outcome_unknown with Retry-After, not 201. The client
// sends the same key again and gets the recorded payment, replayed; it was paid once.
TEST_F(HttpPayments, APaymentWhoseCommitIsInDoubtIs504AndTheRetryReplaysIt) {
  auto relay = idem::testing::pg_relay(env("IDEM_TEST_PG_URI"));
  ASSERT_TRUE(relay.has_value()) << "the relay speaks IPv4; the test server is not on it";
  Server server(backing, {"--pg", relay->uri});
  httplib::Client c("127.0.0.1", server.port());
  c.set_read_timeout(20, 0);
  auto warm = c.Post("/payments", headers("alice", "warm"), body_of(0), "application/json");
  ASSERT_TRUE(warm);
  ASSERT_EQ(warm->status, 201) << warm->body;

  // The finish and COMMIT travel in one simple query; a retried commit only reads the record.
  relay->relay->lose_reply_after(
      [](std::string_view chunk) {
        return !chunk.empty() &&
               ((chunk[0] == 'Q' && chunk.find("idem_finish_held") != chunk.npos) ||
                (chunk[0] == 'B' && chunk.find("idem_read") != chunk.npos));
      },
      3);
  auto doubt = c.Post("/payments", headers("alice", "k-doubt"), body_of(7), "application/json");
  ASSERT_TRUE(doubt);
  EXPECT_TRUE(relay->relay->one_shot_fired());
  EXPECT_EQ(doubt->status, 504) << doubt->body;
  EXPECT_EQ(doubt->get_header_value("Retry-After"), "1");
  EXPECT_EQ(json::parse(doubt->body)["type"], "urn:idem:problem:outcome_unknown") << doubt->body;

  auto retry = c.Post("/payments", headers("alice", "k-doubt"), body_of(7), "application/json");
  ASSERT_TRUE(retry);
  EXPECT_EQ(retry->status, 201) << retry->body;
  EXPECT_EQ(retry->get_header_value("Idempotent-Replayed"), "true");
  EXPECT_EQ(json::parse(retry->body)["amount"], 107);
  EXPECT_EQ(backing.rows_per_key()["alice:k-doubt"], 1);
}
#endif

}  // namespace
