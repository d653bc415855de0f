// Nothing lost under load (label http-load): 32 clients on keep-alive connections drive the real
// server process with fresh keys, repeats of keys already paid, and rounds in which every client
// sends the same new key at once. Correctness only, no timings: no 5xx, one payment row per key
// that got a 201, every answer for a key byte-identical to its first, and a 409 only while the
// key's first request runs.
//
// Built twice like http_payments_test.cpp: SQLite with the in-memory gateway (http-load, sqlite)
// and PostgreSQL + Redis (http-load, postgres, redis).

#include <gtest/gtest.h>

#include <barrier>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "http_test_support.hpp"

namespace {

using namespace http_test;
using Clock = std::chrono::steady_clock;

constexpr int kClients = 32;
constexpr int kRounds = 8;
constexpr int kFreshPerRound = 2;
constexpr int kRepeatsPerRound = 2;
const std::string kPrincipal = "load";

struct Answer {
  std::string key;
  int status = 0;  // 0: no answer (the request failed on the wire)
  bool replayed = false;
  std::string retry_after;
  std::string body;
  Clock::time_point sent, received;
};

class HttpLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kPg && (env("IDEM_TEST_PG_URI") == nullptr || env("IDEM_TEST_REDIS_URI") == nullptr)) {
      GTEST_SKIP()
          << "IDEM_TEST_PG_URI and IDEM_TEST_REDIS_URI are not set (scripts/test sets them)";
    }
  }

  // One client: each round, some new keys, some repeats of its own paid keys, then the round's
  // shared key together with every other client.
  void drive(int client, int port, std::barrier<>& together) {
    httplib::Client c("127.0.0.1", port);
    c.set_keep_alive(true);
    c.set_connection_timeout(10, 0);
    c.set_read_timeout(30, 0);
    std::vector<std::string> paid;
    std::vector<Answer> mine;
    auto post = [&](const std::string& key) {
      Answer a;
      a.key = key;
      a.sent = Clock::now();
      auto r = c.Post("/payments", headers(kPrincipal, key), body_for(key), "application/json");
      a.received = Clock::now();
      if (r) {
        a.status = r->status;
        a.replayed = r->get_header_value("Idempotent-Replayed") == "true";
        a.retry_after = r->get_header_value("Retry-After");
        a.body = r->body;
      }
      mine.push_back(a);
      return a;
    };
    for (int round = 0; round < kRounds; ++round) {
      for (int i = 0; i < kFreshPerRound; ++i) {
        const std::string key =
            "c" + std::to_string(client) + "-r" + std::to_string(round) + "-" + std::to_string(i);
        if (post(key).status == 201) paid.push_back(key);
      }
      for (int i = 0; i < kRepeatsPerRound && !paid.empty(); ++i) {
        post(paid[(static_cast<std::size_t>(round) * 7 + i * 3 + client) % paid.size()]);
      }
      together.arrive_and_wait();
      post("race-" + std::to_string(round));
    }
    std::lock_guard lock(mutex_);
    answers_.insert(answers_.end(), mine.begin(), mine.end());
  }

  static std::string body_for(const std::string& key) {
    return json{{"amount", 100 + static_cast<int>(key.size())}, {"currency", "EUR"}}.dump();
  }

  Backing backing;
  std::mutex mutex_;
  std::vector<Answer> answers_;
};

TEST_F(HttpLoad, ManyClientsFreshRepeatedAndRacingKeysLoseNothing) {
  Server server(backing, {"--delay-ms", "2"});  // a first request stays in flight a little
  {
    std::barrier together(kClients);
    std::vector<std::thread> clients;
    for (int i = 0; i < kClients; ++i) {
      clients.emplace_back([&, i] { drive(i, server.port(), together); });
    }
    for (auto& t : clients) t.join();
  }

  std::map<std::string, std::vector<const Answer*>> by_key;
  int conflicts = 0;
  for (const Answer& a : answers_) {
    ASSERT_NE(a.status, 0) << a.key << ": no answer";
    ASSERT_LT(a.status, 500) << a.key << ": " << a.body;
    ASSERT_TRUE(a.status == 201 || a.status == 409) << a.key << ": " << a.status << " " << a.body;
    if (a.status == 409) {
      ++conflicts;
      // The seconds left on the holder's lease (30 s by default), rounded up. SQLite computes the
      // lease left from its own millisecond clock in floating point, which can read 1 ms over a
      // fresh 30 s lease: 31.
      const int retry_after = std::stoi(a.retry_after);
      EXPECT_GE(retry_after, 1) << a.key;
      EXPECT_LE(retry_after, 31) << a.key;
    }
    by_key[a.key].push_back(&a);
  }
  EXPECT_EQ(answers_.size(),
            static_cast<std::size_t>(kClients * kRounds * (kFreshPerRound + kRepeatsPerRound + 1)));

  const std::map<std::string, long long> rows = backing.rows_per_key();
  std::size_t paid_keys = 0;
  for (const auto& [key, answers] : by_key) {
    const Answer* first = nullptr;
    for (const Answer* a : answers) {
      if (a->status == 201 && !a->replayed) {
        EXPECT_EQ(first, nullptr) << key << " was executed twice";
        first = a;
      }
    }
    ASSERT_NE(first, nullptr) << key << ": no request ran it";
    ++paid_keys;
    const auto row = rows.find(kPrincipal + ":" + key);
    EXPECT_EQ(row == rows.end() ? 0 : row->second, 1) << key << ": payment rows";
    for (const Answer* a : answers) {
      if (a->status == 201) {
        EXPECT_EQ(a->body, first->body) << key << ": an answer differs from the first";
      } else {
        // 409 only while the first request runs: the two requests overlapped in time.
        EXPECT_LT(a->sent, first->received) << key << ": 409 after the first request ended";
        EXPECT_GT(a->received, first->sent) << key << ": 409 before the first request began";
      }
    }
  }
  EXPECT_EQ(rows.size(), paid_keys) << "payment rows for keys no client saw paid";
  EXPECT_EQ(backing.outbox(), static_cast<long long>(paid_keys));
  // How many duplicates met their key in flight, for the log (how many do depends on timing).
  RecordProperty("conflicts", conflicts);
  std::printf("%zu answers, %zu keys paid, %d answered 409\n", answers_.size(), paid_keys,
              conflicts);
}

}  // namespace
