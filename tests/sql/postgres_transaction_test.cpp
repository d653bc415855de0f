// PostgresStore in transactional mode, seen from the server: the claim's transaction is open
// during the handler (other sessions neither see nor take its rows), settings and BEGIN travel
// with the claim and COMMIT with the finish (counted round trips), and a finish or COMMIT the
// server refuses rolls the handler's writes back and leaves the connection usable.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "sql/sql_test_support.hpp"

namespace idem::testing {
namespace {

using std::chrono::milliseconds;

// A TCP relay in front of the test server that counts ReadyForQuery messages. The server sends
// exactly one at the end of every round trip (a simple query message, however many statements
// it holds, or an extended-protocol Sync), so their number is the number of round trips made.
// It can also cut the connection at the message that carries COMMIT: before the server has it,
// or after the server has answered it (the client never sees the answer).
class RoundTripCounter {
 public:
  enum class Cut { none, before_commit, after_commit };

  RoundTripCounter(std::string host, int port) : host_(std::move(host)), port_(port) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(listener_, 8) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("relay: cannot listen");
    }
    listen_port_ = ntohs(addr.sin_port);
    threads_.emplace_back([this] { accept_loop(); });
  }
  RoundTripCounter(const RoundTripCounter&) = delete;
  RoundTripCounter& operator=(const RoundTripCounter&) = delete;
  ~RoundTripCounter() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    ::close(listener_);
  }

  int port() const { return listen_port_; }
  long long round_trips() const { return ready_.load(); }
  void cut(Cut where) { cut_ = where; }

 private:
  void accept_loop() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int client = ::accept(listener_, nullptr, nullptr);
      if (client < 0) continue;
      const int server = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<std::uint16_t>(port_));
      ::inet_pton(AF_INET, host_.c_str(), &addr.sin_addr);
      if (::connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(client);
        ::close(server);
        continue;
      }
      std::lock_guard lock(mutex_);
      threads_.emplace_back([this, client, server] { relay(client, server); });
    }
  }

  void relay(int client, int server) {
    std::string from_server;  // bytes of a message not complete yet
    char chunk[65536];
    bool commit_sent = false;
    while (!stop_) {
      pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (::poll(p, 2, 50) <= 0) continue;
      if (p[0].revents != 0) {
        const ssize_t n = ::read(client, chunk, sizeof chunk);
        if (n <= 0) break;
        const bool commit = cut_ != Cut::none && chunk[0] == 'Q' &&
                            std::string_view(chunk, static_cast<std::size_t>(n)).find("COMMIT") !=
                                std::string_view::npos;
        if (commit && cut_ == Cut::before_commit) break;
        if (!write_all(server, chunk, n)) break;
        commit_sent = commit_sent || commit;
      }
      if (p[1].revents != 0) {
        // Counted before the client has the bytes: a count read after a call includes it.
        const ssize_t n = ::read(server, chunk, sizeof chunk);
        if (n <= 0 || commit_sent) break;  // the server has answered the COMMIT: drop the answer
        from_server.append(chunk, static_cast<std::size_t>(n));
        count_ready(from_server);
        if (!write_all(client, chunk, n)) break;
      }
    }
    ::close(client);
    ::close(server);
  }

  // Backend messages: a type byte, then a 4-byte big-endian length that counts itself.
  void count_ready(std::string& buffer) {
    std::size_t at = 0;
    while (buffer.size() - at >= 5) {
      std::uint32_t len = 0;
      std::memcpy(&len, buffer.data() + at + 1, 4);
      len = ntohl(len);
      if (buffer.size() - at < 1 + static_cast<std::size_t>(len)) break;
      if (buffer[at] == 'Z') ++ready_;
      at += 1 + len;
    }
    buffer.erase(0, at);
  }

  static bool write_all(int fd, const char* data, ssize_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd, data, static_cast<std::size_t>(n));
      if (w <= 0) return false;
      data += w;
      n -= w;
    }
    return true;
  }

  std::string host_;
  int port_;
  int listener_ = -1;
  int listen_port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<long long> ready_{0};
  std::atomic<Cut> cut_{Cut::none};
  std::mutex mutex_;
  std::vector<std::thread> threads_;  // the accept loop first; it alone adds more
};

class PostgresTransactionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto uri = pg_uri();
    if (!uri) GTEST_SKIP() << kNoPgMessage;
    target_ = Target{Backend::postgres, *uri, unique_name("ptx") + "_"};
    create_business_table(target_);
  }

  // A store of one connection, so that every call below shares its session.
  std::unique_ptr<PostgresStore> make(SqlMode mode, const std::string& uri) {
    auto store = std::make_unique<PostgresStore>(
        PostgresStoreOptions{.connection = {.uri = uri, .table_prefix = target_.prefix},
                             .mode = mode,
                             .pool = {.size = 1}});
    const Status ready = store->ensure_schema();
    EXPECT_TRUE(ready.ok()) << ready.failure().describe();
    return store;
  }
  std::unique_ptr<PostgresStore> make(SqlMode mode) { return make(mode, target_.location); }

  std::string records() const { return target_.prefix + "records"; }

  // A relay in front of the test server, and in `uri` a connection string through it; null when
  // the server is not on IPv4.
  std::unique_ptr<RoundTripCounter> relay_to_server(std::string& uri) {
    // Where the server is, as it says; the relay passes the same user and database on.
    pqxx::connection probe(target_.location);
    const pqxx::result found = pqxx::nontransaction(probe).exec(
        "SELECT host(inet_server_addr()), inet_server_port(), current_user, current_database()");
    const auto where = found.at(0);
    if (where[0].is_null() || where[0].as<std::string>().find(':') != std::string::npos) {
      return nullptr;
    }
    auto relay = std::make_unique<RoundTripCounter>(where[0].as<std::string>(), where[1].as<int>());
    auto quoted = [](const std::string& v) {  // a connection-string value
      std::string out = "'";
      for (char c : v) out += c == '\\' || c == '\'' ? std::string{'\\', c} : std::string(1, c);
      return out + "'";
    };
    uri = "host=127.0.0.1 port=" + std::to_string(relay->port()) +
          " sslmode=disable gssencmode=disable user=" + quoted(where[2].as<std::string>()) +
          " dbname=" + quoted(where[3].as<std::string>());
    return relay;
  }

  // After a call on "k" whose transaction failed (its handler ran once): neither its row nor the
  // record is left, and a retry runs on the same connection (the store has one) and commits.
  void expect_nothing_left_and_a_retry_runs(IdempotencyGuard<PostgresStore>& guard, int& runs) {
    EXPECT_EQ(runs, 1);
    EXPECT_EQ(count_business_rows(target_, "k"), 0);
    EXPECT_EQ(count_records(target_), 0);
    auto again = guard.execute("k", [&](Context& ctx) {
      ++runs;
      insert_business_row(target_, ctx, "k", "once");
      return 2;
    });
    ASSERT_TRUE(again.has_value()) << again.message();
    EXPECT_FALSE(again.replayed());
    EXPECT_EQ(again.value(), 2);
    EXPECT_EQ(runs, 2);
    EXPECT_EQ(count_business_rows(target_, "k"), 1);
  }

  Target target_;
};

// Round trips per call, counted on the wire after a warm-up (statements prepared, settings
// sent). Transactional: BEGIN goes with the claim and COMMIT with the finish.
TEST_F(PostgresTransactionTest, AFreshTransactionalCallIsTwoRoundTripsLikeALeaseCall) {
  std::string uri;
  const auto relay = relay_to_server(uri);
  if (!relay) GTEST_SKIP() << "the relay speaks IPv4; the test server is not on it";

  struct Count {
    long long fresh, replay, fresh_with_insert;
  };
  auto count = [&](SqlMode mode) {
    auto store = make(mode, uri);
    IdempotencyGuard guard{*store, Options{.scope = std::string(name_of(mode))}};
    const bool tx = mode == SqlMode::transactional;
    auto call = [&](const std::string& key, bool insert) {
      const long long before = relay->round_trips();
      auto out = guard.execute(key, [&](Context& ctx) {
        if (insert) insert_business_row(target_, ctx, key, "placed");
        return 1;
      });
      EXPECT_TRUE(out.has_value()) << out.message();
      return relay->round_trips() - before;
    };
    (void)call("warm", false);
    (void)call("warm", false);
    (void)call("warm-2", false);
    Count c{};
    c.fresh = call("a", false);
    c.replay = call("a", false);
    c.fresh_with_insert = tx ? call("b", true) : -1;
    return c;
  };
  const Count lease = count(SqlMode::lease);
  EXPECT_EQ(lease.fresh, 2);   // claim, finish
  EXPECT_EQ(lease.replay, 1);  // claim
  const Count tx = count(SqlMode::transactional);
  EXPECT_EQ(tx.fresh, 2);              // BEGIN + claim, finish + COMMIT
  EXPECT_EQ(tx.replay, 2);             // BEGIN + claim, ROLLBACK
  EXPECT_EQ(tx.fresh_with_insert, 3);  // and the handler's INSERT in between
}

// While the handler runs, the claim's transaction is open on the server: another session sees
// neither the record nor the handler's row, and another store on the same tables (its claim
// waits on the uncommitted row) answers in_progress; the timeouts set for the claim are in force.
TEST_F(PostgresTransactionTest, TheClaimsTransactionIsOpenOnTheServerDuringTheHandler) {
  auto store = make(SqlMode::transactional);
  auto other = make(SqlMode::transactional);
  IdempotencyGuard guard{*store, Options{.scope = "open"}};
  IdempotencyGuard other_guard{*other, Options{.scope = "open"}};
  std::string lock_timeout;
  long long records_seen = -1;
  long long rows_seen = -1;
  Outcome<int> refused = Outcome<int>::failed(make_failure(errc::store_unavailable));
  int other_runs = 0;
  auto out = guard.execute("k", [&](Context& ctx) {
    insert_business_row(target_, ctx, "k", "placed");
    lock_timeout = pg_transaction(ctx).exec("SHOW lock_timeout")[0][0].as<std::string>();
    records_seen = count_records(target_);
    rows_seen = count_business_rows(target_, "k");
    refused = other_guard.execute("k", [&] { return ++other_runs; });
    return 7;
  });
  ASSERT_TRUE(out.has_value()) << out.message();
  EXPECT_EQ(lock_timeout, "1ms");  // fail fast: the claim waits on a locked row for 1 ms at most
  EXPECT_EQ(records_seen, 0);
  EXPECT_EQ(rows_seen, 0);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error(), errc::in_progress) << refused.message();
  EXPECT_EQ(other_runs, 0);
  EXPECT_EQ(count_records(target_), 1);
  EXPECT_EQ(count_business_rows(target_, "k"), 1);
  auto replay = other_guard.execute("k", [&] { return ++other_runs; });
  ASSERT_TRUE(replay.has_value()) << replay.message();
  EXPECT_TRUE(replay.replayed());
  EXPECT_EQ(replay.value(), 7);
}

// The settings travel in the transaction and roll back with it: after a handler that threw, the
// next claim on the same connection sends them again.
TEST_F(PostgresTransactionTest, TimeoutsRolledBackWithAFailedHandlerAreSentAgain) {
  auto store = make(SqlMode::transactional);
  IdempotencyGuard guard{*store, Options{.scope = "settings"}};
  EXPECT_THROW((void)guard.execute("a", [&](Context&) -> int { throw std::runtime_error("no"); }),
               std::runtime_error);
  std::string lock_timeout;
  auto out = guard.execute("b", [&](Context& ctx) {
    lock_timeout = pg_transaction(ctx).exec("SHOW lock_timeout")[0][0].as<std::string>();
    return 1;
  });
  ASSERT_TRUE(out.has_value()) << out.message();
  EXPECT_EQ(lock_timeout, "1ms");
}

// A FailFast claim sets lock_timeout to 1 ms so that it never waits on a holder; that limit must
// not reach the finish. Here the finish has to wait (a trigger on the record's UPDATE takes an
// advisory lock another session holds for a while): the commit waits and lands, where the claim's
// 1 ms used to cancel it and roll the handler's writes back.
TEST_F(PostgresTransactionTest, TheClaimsLockTimeoutDoesNotCancelTheFinish) {
  auto store = make(SqlMode::transactional);
  ASSERT_TRUE(store->ensure_schema());
  pqxx::connection admin(target_.location);
  {
    pqxx::work w(admin);
    w.exec("CREATE FUNCTION " + target_.prefix +
           "wait_gate() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
           "PERFORM pg_advisory_xact_lock(7302585012475999); RETURN NEW; END $$");
    w.exec("CREATE TRIGGER " + target_.prefix + "gate BEFORE UPDATE ON " + records() +
           " FOR EACH ROW EXECUTE FUNCTION " + target_.prefix + "wait_gate()");
    w.commit();
  }
  IdempotencyGuard guard{*store, Options{.scope = "gate"}};  // FailFast: lock_timeout 1 ms
  int runs = 0;
  pqxx::work holder(admin);
  std::thread release;
  auto out = guard.execute("k", [&](Context& ctx) {
    ++runs;
    insert_business_row(target_, ctx, "k", "placed");
    holder.exec("SELECT pg_advisory_xact_lock(7302585012475999)");  // the finish must wait
    release = std::thread([&holder] {
      std::this_thread::sleep_for(std::chrono::milliseconds{200});
      holder.commit();  // frees the gate
    });
    return 1;
  });
  release.join();
  ASSERT_TRUE(out) << out.message() << " / " << out.commit_failure().message;
  EXPECT_TRUE(out.recorded()) << out.commit_failure().message;
  EXPECT_EQ(count_business_rows(target_, "k"), 1);
  auto again = guard.execute("k", [&] { return ++runs; });
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(runs, 1);
}

// A COMMIT the server refuses (a deferred constraint the handler's writes break) rolls back the
// handler's rows and the record: the call fails, nothing is left, and the key runs again on the
// same connection.
TEST_F(PostgresTransactionTest, ARefusedCommitRollsBackTheHandlersWritesAndTheRecord) {
  {
    pqxx::connection c(target_.location);
    pqxx::work w(c);
    w.exec("ALTER TABLE " + business_table(target_) + " ADD CONSTRAINT " + target_.prefix +
           "one_note UNIQUE (key, note) DEFERRABLE INITIALLY DEFERRED");
    w.commit();
  }
  auto store = make(SqlMode::transactional);
  IdempotencyGuard guard{*store, Options{.scope = "deferred"}};
  int runs = 0;
  auto out = guard.execute("k", [&](Context& ctx) {
    ++runs;
    insert_business_row(target_, ctx, "k", "twice");
    insert_business_row(target_, ctx, "k", "twice");  // legal until COMMIT
    return 1;
  });
  ASSERT_TRUE(out.has_value());  // the value, unrecorded: its transaction is gone
  EXPECT_FALSE(out.recorded());
  EXPECT_EQ(out.commit_error(), errc::store_unavailable);
  EXPECT_NE(out.commit_failure().message.find("23505"), std::string::npos)
      << out.commit_failure().message;
  expect_nothing_left_and_a_retry_runs(guard, runs);
}

// A finish that matches no row (here the handler moved the record's fence in its own
// transaction) is lease_lost, and the COMMIT sent with it does not happen: the handler's row
// and the record roll back, and the connection serves the next call.
TEST_F(PostgresTransactionTest, AFinishThatMatchesNoRowIsLeaseLostAndCommitsNothing) {
  auto store = make(SqlMode::transactional);
  IdempotencyGuard guard{*store, Options{.scope = "fence"}};
  int runs = 0;
  auto out = guard.execute("k", [&](Context& ctx) {
    ++runs;
    insert_business_row(target_, ctx, "k", "placed");
    pg_transaction(ctx).exec("UPDATE " + records() + " SET fence = fence + 1000");
    return 1;
  });
  ASSERT_TRUE(out.has_value());
  EXPECT_FALSE(out.recorded());
  EXPECT_EQ(out.commit_error(), errc::lease_lost) << out.commit_failure().message;
  expect_nothing_left_and_a_retry_runs(guard, runs);
}

// A statement that fails on the handle leaves the transaction to the server, open and aborted
// (on every libpqxx version: a library rollback would have ended it, and the next statement
// would fail in libpqxx instead). Nothing of the call commits, and the key runs again.
TEST_F(PostgresTransactionTest, AFailedStatementLeavesTheTransactionOpenAndAbortedOnTheServer) {
  auto store = make(SqlMode::transactional);
  IdempotencyGuard guard{*store, Options{.scope = "failed"}};
  int runs = 0;
  std::string first_state;
  std::string next_state;
  auto out = guard.execute("k", [&](Context& ctx) {
    ++runs;
    pqxx::dbtransaction& tx = pg_transaction(ctx);
    insert_business_row(target_, ctx, "k", "placed");
    try {
      tx.exec("SELECT 1 / 0");
    } catch (const pqxx::sql_error& e) {
      first_state = e.sqlstate();
    }
    try {
      tx.exec("SELECT 1");
    } catch (const pqxx::sql_error& e) {
      next_state = e.sqlstate();  // the server refuses: its transaction is still open, aborted
    }
    return 1;
  });
  EXPECT_EQ(first_state, "22012");  // division_by_zero
  EXPECT_EQ(next_state, "25P02");   // in_failed_sql_transaction
  ASSERT_TRUE(out.has_value());
  EXPECT_FALSE(out.recorded());
  EXPECT_EQ(out.commit_error(), errc::store_unavailable) << out.commit_failure().message;
  expect_nothing_left_and_a_retry_runs(guard, runs);
}

// Savepoints work on the handle: a subtransaction's failed statement leaves the rest standing.
TEST_F(PostgresTransactionTest, ASubtransactionOnTheHandleIsASavepoint) {
  auto store = make(SqlMode::transactional);
  IdempotencyGuard guard{*store, Options{.scope = "savepoint"}};
  auto out = guard.execute("k", [&](Context& ctx) {
    pqxx::dbtransaction& tx = pg_transaction(ctx);
    insert_business_row(target_, ctx, "k", "kept");
    try {
      pqxx::subtransaction sub(tx, "attempt");
      sub.exec("INSERT INTO " + business_table(target_) + " (key, note) VALUES ('k', 'gone')");
      sub.exec("SELECT 1 / 0");
      sub.commit();
    } catch (const pqxx::sql_error&) {
      // the savepoint rolled back; the transaction goes on
    }
    return 1;
  });
  ASSERT_TRUE(out.has_value()) << out.message();
  EXPECT_EQ(count_business_rows(target_, "k"), 1);
}

// The connection drops while the message with COMMIT is under way. If the server committed, the
// guard's commit retry finds the record committed under its fence: the value is recorded. If it
// never had the COMMIT (rolled back), the caller hears outcome_unknown, and a retry of the call
// settles it: a replay of the committed result, or one run.
TEST_F(PostgresTransactionTest, AConnectionLostAtCommitSaysTheOutcomeIsUnknownAndARetrySettlesIt) {
  for (const auto cut :
       {RoundTripCounter::Cut::before_commit, RoundTripCounter::Cut::after_commit}) {
    const bool reached = cut == RoundTripCounter::Cut::after_commit;
    SCOPED_TRACE(reached ? "the server committed" : "the server never had the COMMIT");
    const std::string key = reached ? "after" : "before";
    std::string uri;
    const auto relay = relay_to_server(uri);
    if (!relay) GTEST_SKIP() << "the relay speaks IPv4; the test server is not on it";
    auto store = make(SqlMode::transactional, uri);
    IdempotencyGuard guard{*store, Options{.scope = "cut"}};
    int runs = 0;
    relay->cut(cut);
    auto out = guard.execute(key, [&](Context& ctx) {
      ++runs;
      insert_business_row(target_, ctx, key, "placed");
      return 5;
    });
    relay->cut(RoundTripCounter::Cut::none);
    // The handler's value reaches its caller; the commit's fate is the commit error.
    ASSERT_TRUE(out.has_value()) << out.message();
    EXPECT_EQ(out.recorded(), reached) << out.commit_failure().describe();
    if (!reached) {
      EXPECT_EQ(out.commit_error(), errc::outcome_unknown);
      EXPECT_NE(out.commit_failure().describe().find("may or may not have committed"),
                std::string::npos)
          << out.commit_failure().describe();
    }
    EXPECT_EQ(count_business_rows(target_, key), reached ? 1 : 0);

    // The server ends the cut session's transaction when it sees the connection gone; until
    // then its row is locked and a retry hears in_progress.
    auto retry = [&] {
      return guard.execute(key, [&](Context& ctx) {
        ++runs;
        insert_business_row(target_, ctx, key, "placed");
        return 6;
      });
    };
    auto again = retry();
    for (int i = 0; i < 100 && !again.has_value() && again.error() == errc::in_progress; ++i) {
      std::this_thread::sleep_for(milliseconds{50});
      again = retry();
    }
    ASSERT_TRUE(again.has_value()) << again.message();
    EXPECT_EQ(again.replayed(), reached);
    EXPECT_EQ(again.value(), reached ? 5 : 6);
    EXPECT_EQ(runs, reached ? 1 : 2);
    EXPECT_EQ(count_business_rows(target_, key), 1);
  }
}

}  // namespace
}  // namespace idem::testing
