// GroupCommitStore over the SQL stores: the record-store conformance kit through it (every key
// keeps its single-key answers), exactly-once under threads and processes, and no caller
// released before its group is durable (a SIGKILL right after a call returned loses nothing).
// On PostgreSQL: a group is one round trip, and a group that fails (a bad row, the connection
// lost on the way there or back) fails each caller and writes all of its calls or none, also
// while another group is in flight.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "idem/engine/record_model.hpp"
#include "idem/group_commit_store.hpp"
#include "idem/sqlite/admin.hpp"
#include "idem/testing/record_store_conformance.hpp"
#include "sql/pg_relay.hpp"
#include "sql/sql_test_support.hpp"

namespace idem::testing {

namespace {

// A SqliteStore (synchronous = FULL) behind a GroupCommitStore; the file outlives both.
struct GroupedParts {
  GroupedParts(std::shared_ptr<TempDb> file, std::chrono::milliseconds busy)
      : db(std::move(file)),
        inner(SqliteStoreOptions{.path = db->path(),
                                 .table_prefix = "idem_",
                                 .busy_timeout = busy,
                                 .synchronous_full = true}) {}
  std::shared_ptr<TempDb> db;
  SqliteStore inner;
};

struct GroupedSqliteStore : private GroupedParts, public GroupCommitStore<SqliteStore> {
  explicit GroupedSqliteStore(std::shared_ptr<TempDb> file,
                              std::chrono::milliseconds busy = std::chrono::seconds{5})
      : GroupedParts(std::move(file), busy), GroupCommitStore<SqliteStore>(inner) {}
  const std::shared_ptr<TempDb>& file() const { return db; }
};

}  // namespace

template <>
struct StoreTraits<GroupedSqliteStore> {
  static constexpr std::chrono::milliseconds lease{600};
  static constexpr bool admin_release_wakes = false;  // the admin is not a store of the process
  static std::unique_ptr<GroupedSqliteStore> make() {
    return std::make_unique<GroupedSqliteStore>(std::make_shared<TempDb>());
  }
  static std::unique_ptr<GroupedSqliteStore> reopen(GroupedSqliteStore& store) {
    return std::make_unique<GroupedSqliteStore>(store.file(), std::chrono::milliseconds{300});
  }
  static std::unique_ptr<admin::Admin> admin(GroupedSqliteStore& store) {
    return admin::sqlite_admin({.path = store.file()->path(), .table_prefix = "idem_"});
  }
  static void advance(GroupedSqliteStore&, std::chrono::milliseconds d) {
    std::this_thread::sleep_for(d);
  }
};

namespace {

// Where a group-commit test's records live.
struct Place {
  Backend backend;
  std::string location;
  std::string prefix;
};

std::unique_ptr<SqlStore> open_store(const Place& p) {
  if (p.backend == Backend::sqlite) {
    return std::make_unique<SqliteStore>(
        SqliteStoreOptions{.path = p.location, .table_prefix = p.prefix, .synchronous_full = true});
  }
  return std::make_unique<PostgresStore>(PostgresStoreOptions{
      .connection = {.uri = p.location, .table_prefix = p.prefix}, .pool = {.size = 4}});
}

class GroupCommitTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::postgres) {
      if (!pg_uri()) GTEST_SKIP() << kNoPgMessage;
      place_ = Place{Backend::postgres, *pg_uri(), unique_name("gc") + "_"};
    } else {
      place_ = Place{Backend::sqlite, db_.path(), "gc_"};
    }
    // The schema first, so that processes started together do not race to create it.
    ASSERT_TRUE(open_store(place_)->ensure_schema());
  }

  TempDb db_;
  Place place_{};
};

constexpr auto kLongLease = std::chrono::minutes{2};

// `threads` threads each make `calls` calls of execute() on overlapping keys (of `keys`): each
// key's handler runs once and every answer is the key's value (or in_progress while its holder
// runs); then every key that ran replays its value.
template <class Guard>
void run_each_key_once(Guard& guard, int threads, int calls, int keys) {
  std::mutex m;
  std::map<int, int> runs;
  std::atomic<int> wrong{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < calls; ++i) {
        const int k = (t * 37 + i * 7) % keys;
        auto r = guard.execute(Key{"key-" + std::to_string(k)}, [&] {
          std::lock_guard lock(m);
          ++runs[k];
          return k;
        });
        if (r.error() == errc::in_progress) continue;
        if (!r || r.value() != k) ++wrong;
      }
    });
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(wrong.load(), 0);
  for (const auto& [k, n] : runs) EXPECT_EQ(n, 1) << "key-" << k;
  for (const auto& [k, n] : runs) {
    auto r = guard.execute(Key{"key-" + std::to_string(k)}, [] { return -1; });
    EXPECT_TRUE(r.replayed());
    EXPECT_EQ(r.value(), k);
  }
}

// 8 threads call execute() on overlapping keys through one GroupCommitStore: each key's handler
// runs once, every answer is the key's value (or in_progress while its holder runs), and the
// calls were written in groups.
TEST_P(GroupCommitTest, ThreadsRunEachKeyOnce) {
  auto inner = open_store(place_);
  GroupCommitStore<SqlStore> grouped(*inner);
  IdempotencyGuard guard(grouped, Options{.scope = "gc.threads", .lease = kLongLease});
  run_each_key_once(guard, 8, 60, 120);
  EXPECT_LT(grouped.groups(), grouped.grouped_calls()) << "no two calls shared a group";
  const StoreStats stats = grouped.stats();  // the groups' figures beside the store's own
  ASSERT_TRUE(stats.group.has_value());
  EXPECT_EQ(stats.group->groups, grouped.groups());
  EXPECT_EQ(stats.group->calls, grouped.grouped_calls());
  EXPECT_EQ(stats.store, inner->stats().store);
  EXPECT_TRUE(stats.pool.has_value());
}

// A SqlStore whose groups are counted as they are written, and held a little so that groups
// written at the same time overlap: the most written at once is what GroupCommitStore allowed.
struct OverlapCountingStore {
  SqlStore& inner;
  std::atomic<int> writing{0};
  std::atomic<int> most{0};
  std::atomic<int> groups_written{0};

  Result<Claim> claim(const ClaimRequest& r) { return inner.claim(r); }
  Status commit(const Ticket& t, const Completion& c) { return inner.commit(t, c); }
  Status abort(const Ticket& t) { return inner.abort(t); }
  Status extend(const Ticket& t, std::chrono::milliseconds lease) { return inner.extend(t, lease); }
  std::vector<Result<Claim>> claim_batch(std::span<const ClaimRequest> r) {
    return inner.claim_batch(r);
  }
  std::vector<Status> commit_batch(std::span<const CommitRequest> r) {
    return inner.commit_batch(r);
  }
  GroupAnswers write_group(std::span<const CommitRequest> commits,
                           std::span<const ClaimRequest> claims) {
    ++groups_written;
    const int now = ++writing;
    for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{2});
    GroupAnswers out = inner.write_group(commits, claims);
    --writing;
    return out;
  }
};

// Two groups in flight from one queue, under 12 threads on overlapping keys: each key's handler
// runs once, every answer is the key's value (or in_progress), and two groups were written at
// the same time, never more.
TEST_P(GroupCommitTest, TwoGroupsInFlightRunEachKeyOnce) {
  auto inner = open_store(place_);
  OverlapCountingStore counting{*inner};
  GroupCommitStore<OverlapCountingStore> grouped(counting, GroupCommitOptions{.in_flight = 2});
  IdempotencyGuard guard(grouped, Options{.scope = "gc.in_flight", .lease = kLongLease});
  run_each_key_once(guard, 12, 50, 150);
  EXPECT_EQ(counting.most.load(), 2) << "groups written at the same time";
}

// A lone caller's calls are groups of one, each the store's own claim or commit: no group
// step, and the answers of the store itself.
TEST_P(GroupCommitTest, LoneCallerMakesTheStoresOwnCalls) {
  auto inner = open_store(place_);
  OverlapCountingStore counting{*inner};
  GroupCommitStore<OverlapCountingStore> grouped(counting);
  IdempotencyGuard guard(grouped, Options{.scope = "gc.lone", .lease = kLongLease});
  for (int i = 0; i < 10; ++i) {
    auto r = guard.execute(Key{"lone-" + std::to_string(i)}, [i] { return i; });
    ASSERT_TRUE(r.recorded()) << r.message();
    auto again = guard.execute(Key{"lone-" + std::to_string(i)}, [] { return -1; });
    EXPECT_TRUE(again.replayed());
    EXPECT_EQ(again.value(), i);
  }
  EXPECT_EQ(grouped.groups(), grouped.grouped_calls());
  EXPECT_EQ(counting.groups_written.load(), 0) << "groups of one went through the group step";
}

// Runs `body` in a child process; returns its pid.
template <class Body>
pid_t spawn(Body body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int code = 1;
    try {
      code = body();
    } catch (...) {
    }
    ::_exit(code);
  }
  return pid;
}

// Three processes, four threads each, on the same keys: every key's handler ran once in all
// (each run appends a line to a shared log).
TEST_P(GroupCommitTest, ProcessesRunEachKeyOnce) {
  const std::string log = db_.path() + ".runs";
  constexpr int kKeys = 90;
  std::vector<pid_t> children;
  for (int p = 0; p < 3; ++p) {
    children.push_back(spawn([&, p] {
      auto inner = open_store(place_);
      GroupCommitStore<SqlStore> grouped(*inner);
      IdempotencyGuard guard(grouped, Options{.scope = "gc.procs", .lease = kLongLease});
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      std::atomic<int> bad{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
          for (int i = 0; i < kKeys; ++i) {
            const int k = (i + p * 31 + t * 17) % kKeys;
            auto r = guard.execute(Key{"key-" + std::to_string(k)}, [&] {
              const std::string line = std::to_string(k) + "\n";
              if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) ++bad;
              return k;
            });
            if (r.error() == errc::in_progress) continue;
            if (!r || r.value() != k) {
              std::fprintf(stderr, "key-%d: %s\n", k, r.message().c_str());
              ++bad;
            }
          }
        });
      }
      for (auto& th : threads) th.join();
      ::close(fd);
      return bad.load() == 0 ? 0 : 2;
    }));
  }
  for (pid_t c : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(c, &status, 0), c);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
  std::map<int, int> runs;
  std::ifstream in(log);
  for (int k; in >> k;) ++runs[k];
  for (const auto& [k, n] : runs) EXPECT_EQ(n, 1) << "key-" << k;
  std::remove(log.c_str());
}

// A child records fresh keys through group commit from four threads and reports each key on a
// pipe as soon as its call returned recorded(); the parent SIGKILLs it mid-run. Every key it
// reported must replay: no caller returned before its group was durable.
TEST_P(GroupCommitTest, SigkillAfterReturnLosesNothing) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = spawn([&] {
    ::close(fds[0]);
    auto inner = open_store(place_);
    GroupCommitStore<SqlStore> grouped(*inner);
    IdempotencyGuard guard(grouped, Options{.scope = "gc.kill", .lease = kLongLease});
    std::mutex pipe_mutex;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0;; ++i) {
          const std::string id = std::to_string(t) + "-" + std::to_string(i);
          auto r = guard.execute(Key{id}, [&] { return "v" + id; });
          if (!r.recorded()) continue;
          const std::string line = id + "\n";
          std::lock_guard lock(pipe_mutex);
          (void)!::write(fds[1], line.data(), line.size());
        }
      });
    }
    for (auto& th : threads) th.join();
    return 0;
  });
  ::close(fds[1]);
  std::vector<std::string> reported;
  std::string pending;
  char buf[4096];
  while (reported.size() < 60) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    ASSERT_GT(n, 0) << "the child stopped reporting";
    pending.append(buf, static_cast<std::size_t>(n));
    for (std::size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
      reported.push_back(pending.substr(0, nl));
      pending.erase(0, nl + 1);
    }
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  // What it reported before it died, to the last whole line.
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) pending.append(buf, n);
  for (std::size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
    reported.push_back(pending.substr(0, nl));
    pending.erase(0, nl + 1);
  }
  ::close(fds[0]);

  auto store = open_store(place_);
  IdempotencyGuard guard(*store, Options{.scope = "gc.kill", .lease = kLongLease});
  for (const std::string& id : reported) {
    auto r = guard.execute(Key{id}, [] { return std::string("lost"); });
    EXPECT_TRUE(r.replayed()) << id << ": " << r.message();
    if (r) {
      EXPECT_EQ(r.value(), "v" + id);
    }
  }
}

// A group whose step fails fails each of its callers with the store's error, and writes none of
// its calls: here the SQLite file is not a database.
TEST(GroupCommit, FailingGroupFailsEachCaller) {
  TempDb db;
  {
    std::ofstream junk(db.path());
    junk << std::string(8192, 'x');
  }
  SqliteStore inner(SqliteStoreOptions{.path = db.path()});
  GroupCommitStore<SqliteStore> grouped(inner);
  IdempotencyGuard guard(grouped, Options{.scope = "gc.fail"});
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  std::atomic<int> ran{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto r = guard.execute(Key{"k" + std::to_string(t)}, [&] { return ++ran; });
      if (r.error() == errc::store_unavailable) ++failed;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failed.load(), 4);
  EXPECT_EQ(ran.load(), 0);
}

// --- PostgreSQL: one round trip per group; a failing group writes all of its calls or none ---

// The answers of one group, in the order of its commits and claims.
struct GroupAnswersSeen {
  std::vector<Status> commits;
  std::vector<Result<Claim>> claims;
};

// Sends the commits and the claims at once, one thread each, through a GroupCommitStore that
// waits for all of them and writes them as one group.
GroupAnswersSeen write_as_one_group(PostgresStore& store, const std::vector<CommitRequest>& commits,
                                    const std::vector<ClaimRequest>& claims) {
  GroupCommitStore<PostgresStore> grouped(
      store, GroupCommitOptions{.max_delay = std::chrono::seconds{30},
                                .max_batch = commits.size() + claims.size()});
  std::vector<std::optional<Status>> committed(commits.size());
  std::vector<std::optional<Result<Claim>>> claimed(claims.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < commits.size(); ++i) {
    threads.emplace_back(
        [&, i] { committed[i] = grouped.commit(commits[i].ticket, commits[i].completion); });
  }
  for (std::size_t i = 0; i < claims.size(); ++i) {
    threads.emplace_back([&, i] { claimed[i] = grouped.claim(claims[i]); });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(grouped.groups(), 1u) << "the calls did not go as one group";
  GroupAnswersSeen out;
  for (auto& c : committed) out.commits.push_back(std::move(*c));
  for (auto& c : claimed) out.claims.push_back(std::move(*c));
  return out;
}

// A PostgresStore with one connection, through a relay that can count the client's messages and
// cut the connection; its tables are this test's own.
class PgGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!pg_uri()) GTEST_SKIP() << kNoPgMessage;
    relay_ = pg_relay(*pg_uri());
    if (!relay_) GTEST_SKIP() << "the PostgreSQL test server is not on IPv4";
    prefix_ = unique_name("gcpg") + "_";
    store_ = std::make_unique<PostgresStore>(PostgresStoreOptions{
        .connection = {.uri = relay_->uri, .table_prefix = prefix_}, .pool = {.size = 1}});
    ASSERT_TRUE(store_->ensure_schema());
  }

  // A key that lives as long as the test (requests view their keys).
  std::string_view key(const std::string& name) { return keys_.emplace_back(name); }

  ClaimRequest claim_of(std::string_view k) const {
    return ClaimRequest{.key = k,
                        .fingerprint = {7, 11},
                        .lease = std::chrono::minutes{2},
                        .retention = std::chrono::minutes{10}};
  }

  // Holds `name` (a fresh key) on the store itself, and the commit that ends it.
  CommitRequest held(const std::string& name) {
    const std::string_view k = key(name);
    Result<Claim> c = store_->claim(claim_of(k));
    EXPECT_TRUE(c && c.value().status == ClaimStatus::acquired) << name;
    const Fence fence = c ? c.value().fence : 0;
    return CommitRequest{Ticket{k, fence},
                         Completion{.result = "done", .ttl = std::chrono::minutes{10}}};
  }

  // The state column of `name`'s record, or -1 when it has none.
  int state_of(const std::string& name) {
    pqxx::connection c(*pg_uri());
    pqxx::nontransaction n(c);
    const pqxx::result r = n.exec("SELECT state FROM " + prefix_ +
                                  "records WHERE key = convert_to(" + n.quote(name) + ", 'UTF8')");
    return r.empty() ? -1 : r[0][0].as<int>();
  }

  void sql(const std::string& statement) {
    pqxx::connection c(*pg_uri());
    pqxx::nontransaction(c).exec(statement);
  }

  static constexpr int kHeld = static_cast<int>(detail::SqlState::held);
  static constexpr int kCompleted = static_cast<int>(detail::SqlState::completed);

  std::optional<PgRelay> relay_;
  std::string prefix_;
  std::unique_ptr<PostgresStore> store_;
  std::deque<std::string> keys_;
};

// The client chunks that carry the group's statement itself (not its preparation, which carries
// the statement's text).
FaultRelay::ChunkPredicate group_statement() {
  return [](std::string_view chunk) {
    return chunk.find("idem_write_many") != std::string_view::npos &&
           chunk.find("unnest") == std::string_view::npos;
  };
}

// A group of commits and claims is one message to the server and one reply: its statements
// were prepared by an earlier group on the same connection.
TEST_F(PgGroupTest, GroupIsOneRoundTrip) {
  auto first = write_as_one_group(*store_, {held("a0"), held("a1")},
                                  {claim_of(key("b0")), claim_of(key("b1"))});
  for (const Status& s : first.commits) EXPECT_TRUE(s) << s.failure().describe();

  const std::vector<CommitRequest> commits{held("a2"), held("a3"), held("a4")};
  std::atomic<int> messages{0};
  relay_->relay->cut_before([&](std::string_view) {
    ++messages;
    return false;  // counts every message, cuts none
  });
  auto second = write_as_one_group(*store_, commits,
                                   {claim_of(key("b2")), claim_of(key("b3")), claim_of(key("b4"))});
  relay_->relay->cut_before(nullptr);
  EXPECT_EQ(messages.load(), 1) << "messages the client sent for one group";
  for (const Status& s : second.commits) EXPECT_TRUE(s) << s.failure().describe();
  for (const Result<Claim>& c : second.claims) {
    EXPECT_TRUE(c && c.value().status == ClaimStatus::acquired);
  }
  for (const char* k : {"a2", "a3", "a4"}) EXPECT_EQ(state_of(k), kCompleted) << k;
  for (const char* k : {"b2", "b3", "b4"}) EXPECT_EQ(state_of(k), kHeld) << k;
}

// One row the server refuses (a trigger raises on it) fails the whole group: each caller gets
// store_unavailable with the server's message, and no record of the group changed.
TEST_F(PgGroupTest, BadRowFailsEachCallerAndWritesNone) {
  sql("CREATE FUNCTION " + prefix_ +
      "refuse() RETURNS trigger LANGUAGE plpgsql AS "
      "$f$ BEGIN RAISE EXCEPTION 'poisoned row refused'; END $f$");
  sql("CREATE TRIGGER " + prefix_ + "poison BEFORE INSERT OR UPDATE ON " + prefix_ +
      "records FOR EACH ROW WHEN (NEW.key = convert_to('poison', 'UTF8')) EXECUTE FUNCTION " +
      prefix_ + "refuse()");
  const std::vector<CommitRequest> commits{held("a0"), held("a1")};
  auto seen = write_as_one_group(*store_, commits, {claim_of(key("b0")), claim_of(key("poison"))});
  for (const Status& s : seen.commits) {
    EXPECT_EQ(s.error(), errc::store_unavailable);
    EXPECT_NE(s.failure().describe().find("poisoned row refused"), std::string::npos)
        << s.failure().describe();
  }
  for (const Result<Claim>& c : seen.claims) EXPECT_EQ(c.error(), errc::store_unavailable);
  EXPECT_EQ(state_of("a0"), kHeld);
  EXPECT_EQ(state_of("a1"), kHeld);
  EXPECT_EQ(state_of("b0"), -1);
  EXPECT_EQ(state_of("poison"), -1);
  // The holders still hold their keys under their fences.
  for (const CommitRequest& c : commits) EXPECT_TRUE(store_->commit(c.ticket, c.completion));
}

// The connection lost with the group's statement on its way: each commit is outcome_unknown,
// each claim store_unavailable, and none of them was written. Lost with the reply on its way
// back: the same answers, and all of them were written (a commit retried finds it landed).
TEST_F(PgGroupTest, ConnectionLostFailsEachCallerAndWritesAllOrNone) {
  // The statement prepared on this connection first (its preparation is not the statement).
  write_as_one_group(*store_, {held("w0")}, {claim_of(key("w1"))});

  const std::vector<CommitRequest> commits{held("a0"), held("a1")};
  relay_->relay->cut_before(group_statement());
  auto lost = write_as_one_group(*store_, commits, {claim_of(key("b0")), claim_of(key("b1"))});
  EXPECT_TRUE(relay_->relay->one_shot_fired());
  for (const Status& s : lost.commits) {
    EXPECT_EQ(s.error(), errc::outcome_unknown) << s.failure().describe();
  }
  for (const Result<Claim>& c : lost.claims) EXPECT_EQ(c.error(), errc::store_unavailable);
  for (const char* k : {"a0", "a1"}) EXPECT_EQ(state_of(k), kHeld) << k;
  for (const char* k : {"b0", "b1"}) EXPECT_EQ(state_of(k), -1) << k;

  // A new connection: the group prepares the statement on it, then sends it.
  relay_->relay->lose_reply_after(group_statement());
  auto unanswered =
      write_as_one_group(*store_, commits, {claim_of(key("c0")), claim_of(key("c1"))});
  EXPECT_TRUE(relay_->relay->one_shot_fired());
  for (const Status& s : unanswered.commits) {
    EXPECT_EQ(s.error(), errc::outcome_unknown) << s.failure().describe();
  }
  for (const Result<Claim>& c : unanswered.claims) EXPECT_EQ(c.error(), errc::store_unavailable);
  // The server may still be running the statement the client gave up on: let it end.
  for (int i = 0; i < 200 && state_of("a0") == kHeld; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds{50});
  }
  for (const char* k : {"a0", "a1"}) EXPECT_EQ(state_of(k), kCompleted) << k;
  for (const char* k : {"c0", "c1"}) EXPECT_EQ(state_of(k), kHeld) << k;
  for (const CommitRequest& c : commits) EXPECT_TRUE(store_->commit(c.ticket, c.completion));
}

// Two groups in flight: the second fails (a row the server refuses) while the first is still
// being written (a trigger holds it): each caller of the failed group gets store_unavailable
// at once and none of its records was written; the first group's callers are answered after,
// every record of theirs written.
TEST_F(PgGroupTest, GroupFailsWhileAnotherIsInFlight) {
  sql("CREATE FUNCTION " + prefix_ +
      "refuse() RETURNS trigger LANGUAGE plpgsql AS "
      "$f$ BEGIN IF NEW.key = convert_to('poison', 'UTF8') THEN "
      "RAISE EXCEPTION 'poisoned row refused'; END IF; "
      "PERFORM pg_sleep(3); RETURN NEW; END $f$");
  sql("CREATE TRIGGER " + prefix_ + "poison BEFORE INSERT OR UPDATE ON " + prefix_ +
      "records FOR EACH ROW WHEN (NEW.key IN (convert_to('poison', 'UTF8'), convert_to('slow', "
      "'UTF8'))) EXECUTE FUNCTION " +
      prefix_ + "refuse()");
  PostgresStore pool(PostgresStoreOptions{.connection = {.uri = *pg_uri(), .table_prefix = prefix_},
                                          .pool = {.size = 4}});
  GroupCommitStore<PostgresStore> grouped(
      pool,
      GroupCommitOptions{.max_delay = std::chrono::seconds{30}, .max_batch = 2, .in_flight = 2});
  std::atomic<int> first_answered{0};
  std::atomic<int> second_answered_before_first{0};
  std::vector<std::optional<Result<Claim>>> first(2);
  std::vector<std::optional<Result<Claim>>> second(2);
  // Keys made here: key() is not thread-safe.
  const std::string_view first_keys[] = {key("slow"), key("a1")};
  const std::string_view second_keys[] = {key("poison"), key("b1")};
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      first[i] = grouped.claim(claim_of(first_keys[i]));
      ++first_answered;
    });
  }
  // Both first callers became writers; the one whose call the other took gives its place back.
  // Were it still a writer when the second pair arrives, it would write whatever is queued by
  // then without collecting (a group of one), and the pair would split into two groups. The
  // first group's trigger holds it for 3 s, so the pair meets it in flight.
  while (grouped.groups() < 1 || grouped.writers() > 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds{1});
  }
  for (std::size_t i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      second[i] = grouped.claim(claim_of(second_keys[i]));
      if (first_answered.load() == 0) ++second_answered_before_first;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(grouped.groups(), 2u);
  EXPECT_EQ(second_answered_before_first.load(), 2) << "the second group waited for the first";
  for (const auto& c : second) {
    ASSERT_FALSE(c->has_value()) << "a claim of the failed group was acquired";
    EXPECT_EQ(c->error(), errc::store_unavailable);
    EXPECT_NE(c->failure().describe().find("poisoned row refused"), std::string::npos)
        << c->failure().describe();
  }
  for (const auto& c : first) {
    EXPECT_TRUE(*c && c->value().status == ClaimStatus::acquired)
        << (*c ? std::string("not acquired") : c->failure().describe());
  }
  EXPECT_EQ(state_of("poison"), -1);
  EXPECT_EQ(state_of("b1"), -1);
  EXPECT_EQ(state_of("slow"), kHeld);
  EXPECT_EQ(state_of("a1"), kHeld);
}

INSTANTIATE_TEST_SUITE_P(Sql, GroupCommitTest,
                         ::testing::Values(Backend::sqlite, Backend::postgres),
                         [](const auto& info) { return std::string(name_of(info.param)); });

}  // namespace
}  // namespace idem::testing

IDEM_RECORD_STORE_CONFORMANCE(GroupedSqlite, idem::testing::GroupedSqliteStore);
