// SqliteStore's group commit in lease mode: the caller whose turn it is writes the claims and
// commits queued behind it in one write transaction, each item under a savepoint of its own.
// Batches are made on purpose: another connection holds SQLite's write lock while the first
// caller's group waits for it and the others queue behind (file_group.hpp says where they wait).

#include <SQLiteCpp/Database.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "idem/group_commit_store.hpp"
#include "sql/sql_test_support.hpp"
#include "sqlite/file_group.hpp"
#include "support/child_process.hpp"

namespace idem::testing {
namespace {

using namespace std::chrono_literals;

ClaimRequest request(std::string_view key, std::uint64_t fingerprint = 7) {
  return ClaimRequest{.key = key, .fingerprint = {fingerprint, 1}, .lease = 10s, .retention = 60s};
}

// idem_sql_worker (sql_worker.cpp says what it runs).
class Worker : public ChildProcess {
 public:
  explicit Worker(std::vector<std::string> args) : ChildProcess(IDEM_SQL_WORKER, std::move(args)) {}
};

// What failed, for a Result or a Status ("" when nothing did).
template <class R>
std::string why(const R& r) {
  return r ? std::string() : r.failure().describe();
}

// Waits (bounded) until `ready` holds; false when the bound passed first.
template <class Ready>
bool eventually(Ready ready, std::chrono::seconds bound = 10s) {
  const auto until = std::chrono::steady_clock::now() + bound;
  while (!ready()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

class SqliteGroupTest : public ::testing::Test {
 protected:
  SqliteStoreOptions options(std::chrono::milliseconds busy = 5000ms) const {
    return SqliteStoreOptions{.path = db_.path(), .busy_timeout = busy};
  }

  // Another connection's write transaction: the store's writes wait in SQLite's busy handler.
  struct FileHeld {
    explicit FileHeld(const std::string& path)
        : db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE, 5000) {
      db.exec("BEGIN IMMEDIATE");
    }
    void release() { db.exec("COMMIT"); }
    SQLite::Database db;
  };

  // Starts `call` on a thread of its own once the file is held and a first caller's group is
  // waiting for it, and returns once the call has queued behind that group.
  template <class Call>
  auto queue_behind(sql::FileGroup& group, Call call) {
    const std::size_t before = group.calls.queued();
    auto answer = std::async(std::launch::async, std::move(call));
    EXPECT_TRUE(eventually([&] { return group.calls.queued() == before + 1; }));
    return answer;
  }

  TempDb db_;
};

// Two claims of one key, a failing claim and two plain ones queue behind a waiting group and are
// written together: the second claim of the key sees the first's hold, the failing claim fails
// alone (its savepoint rolled back) and the others land.
TEST_F(SqliteGroupTest, OneGroupKeepsEachCallsAnswerAndFailsOnlyTheFailingCall) {
  SqliteStore store{options()};
  ASSERT_TRUE(store.ensure_schema());
  exec_directly(Target{Backend::sqlite, db_.path(), "idem_"},
                "CREATE TRIGGER poison BEFORE INSERT ON idem_records "
                "WHEN CAST(NEW.key AS TEXT) = 'poison' BEGIN SELECT RAISE(ABORT, 'poisoned'); END");
  const std::shared_ptr<sql::FileGroup> group = sql::file_group(options());
  ASSERT_TRUE(group);
  const StoreStats before = store.stats();
  ASSERT_TRUE(before.group);

  FileHeld held(db_.path());
  auto first = std::async(std::launch::async, [&] { return store.claim(request("first")); });
  ASSERT_TRUE(eventually([&] { return group->calls.groups_in_flight() == 1; }));
  auto a1 = queue_behind(*group, [&] { return store.claim(request("a")); });
  auto a2 = queue_behind(*group, [&] { return store.claim(request("a")); });
  auto poison = queue_behind(*group, [&] { return store.claim(request("poison")); });
  auto b = queue_behind(*group, [&] { return store.claim(request("b")); });
  auto c = queue_behind(*group, [&] { return store.claim(request("c")); });
  held.release();

  const Result<Claim> first_claim = first.get();
  ASSERT_TRUE(first_claim) << why(first_claim);
  const Result<Claim> r1 = a1.get();
  const Result<Claim> r2 = a2.get();
  ASSERT_TRUE(r1) << why(r1);
  ASSERT_TRUE(r2) << why(r2);
  EXPECT_EQ(r1->status, ClaimStatus::acquired);
  EXPECT_EQ(r2->status, ClaimStatus::in_progress);
  EXPECT_EQ(r2->fence, r1->fence);
  const Result<Claim> rp = poison.get();
  ASSERT_FALSE(rp);
  EXPECT_EQ(rp.error(), errc::store_unavailable);
  EXPECT_NE(why(rp).find("poisoned"), std::string::npos) << why(rp);
  for (auto* f : {&b, &c}) {
    const Result<Claim> r = f->get();
    ASSERT_TRUE(r) << why(r);
    EXPECT_EQ(r->status, ClaimStatus::acquired);
  }

  // The first call went alone; the five queued behind it went as one group.
  const StoreStats after = store.stats();
  EXPECT_EQ(after.group->groups - before.group->groups, 2u);
  EXPECT_EQ(after.group->calls - before.group->calls, 6u);

  // What the group wrote is durable and fenced: b and c are held, the poisoned key is not there.
  SqliteStore other{options()};
  EXPECT_EQ(other.claim(request("b"))->status, ClaimStatus::in_progress);
  EXPECT_EQ(other.claim(request("c"))->status, ClaimStatus::in_progress);
  EXPECT_EQ(count_records(Target{Backend::sqlite, db_.path(), "idem_"}), 4);
}

// Commits and claims of one group: a claim queued behind the commit of its key replays it, a
// commit under a stale fence is lease_lost, each answered as alone.
TEST_F(SqliteGroupTest, CommitsAndClaimsOfOneGroupAreEachAnsweredAsAlone) {
  SqliteStore store{options()};
  const Result<Claim> held_x = store.claim(request("x"));
  const Result<Claim> held_y = store.claim(request("y"));
  ASSERT_TRUE(held_x && held_y);
  const std::shared_ptr<sql::FileGroup> group = sql::file_group(options());

  FileHeld held(db_.path());
  auto first = std::async(std::launch::async, [&] { return store.claim(request("first")); });
  ASSERT_TRUE(eventually([&] { return group->calls.groups_in_flight() == 1; }));
  const Completion done{.result = "rx", .ttl = 60s};
  auto commit_x = queue_behind(
      *group, [&] { return store.commit(Ticket{.key = "x", .fence = held_x->fence}, done); });
  auto stale_y = queue_behind(
      *group, [&] { return store.commit(Ticket{.key = "y", .fence = held_y->fence + 5}, done); });
  auto claim_x = queue_behind(*group, [&] { return store.claim(request("x")); });
  held.release();

  ASSERT_TRUE(first.get());
  const Status cx = commit_x.get();
  EXPECT_TRUE(cx) << why(cx);
  const Status sy = stale_y.get();
  ASSERT_FALSE(sy);
  EXPECT_EQ(sy.error(), errc::lease_lost);
  const Result<Claim> again = claim_x.get();
  ASSERT_TRUE(again) << why(again);
  EXPECT_EQ(again->status, ClaimStatus::completed);
  EXPECT_EQ(again->result, "rx");
}

// Calls made while the file stays held past their bound answer store_unavailable, and none of
// them is written later, once the file is free.
TEST_F(SqliteGroupTest, CallsWhoseBoundPassesInTheQueueAreNeverWritten) {
  SqliteStore store{options(300ms)};
  ASSERT_TRUE(store.ensure_schema());
  const std::shared_ptr<sql::FileGroup> group = sql::file_group(options(300ms));
  auto held = std::make_unique<FileHeld>(db_.path());
  auto first = std::async(std::launch::async, [&] { return store.claim(request("first")); });
  ASSERT_TRUE(eventually([&] { return group->calls.groups_in_flight() == 1; }));
  std::vector<std::future<Result<Claim>>> late;
  // Queued behind `first`, or (on a slow machine) written by a later group that finds the file
  // still held: either way unwritten. GroupCommitQueueBoundTest below pins the queue's own bound.
  for (const char* key : {"late-1", "late-2", "late-3"}) {
    late.push_back(
        std::async(std::launch::async, [&store, key] { return store.claim(request(key)); }));
  }
  for (auto& f : late) {
    const Result<Claim> r = f.get();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), errc::store_unavailable) << why(r);
  }
  const Result<Claim> f = first.get();
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error(), errc::store_unavailable);
  held->release();
  held.reset();

  for (const char* key : {"late-1", "late-2", "late-3", "first"}) {
    const Result<Claim> r = store.claim(request(key));
    ASSERT_TRUE(r) << why(r);
    EXPECT_EQ(r->status, ClaimStatus::acquired) << key;
    EXPECT_EQ(r->fence, 1u) << key;  // a fresh record: nothing was written under the key
  }
}

// Eight threads on one store, and eight stores on one file, over shared keys through the guard:
// every key's handler runs once and every call gets that run's value.
void race(const std::vector<SqliteStore*>& stores, const std::string& scope) {
  constexpr int kThreads = 8, kKeys = 150;
  std::vector<std::unique_ptr<IdempotencyGuard<SqliteStore>>> guards;
  guards.reserve(stores.size());
  for (SqliteStore* s : stores) {
    guards.push_back(std::make_unique<IdempotencyGuard<SqliteStore>>(
        *s, Options{.scope = scope, .in_progress = Wait{.timeout = 30s}}));
  }
  std::mutex mutex;
  std::map<std::string, int> ran;
  std::map<std::string, std::vector<std::string>> got;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto& guard = *guards[static_cast<std::size_t>(t) % guards.size()];
      for (int i = 0; i < kKeys; ++i) {
        const std::string k = "k" + std::to_string((i * 7 + t * 13) % kKeys);
        auto out = guard.execute(k, [&] {
          std::lock_guard lock(mutex);
          ++ran[k];
          return "v" + std::to_string(t);
        });
        std::lock_guard lock(mutex);
        if (out) {
          got[k].push_back(out.value());
        } else {
          ++errors;
          ADD_FAILURE() << k << ": " << out.message();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  ASSERT_EQ(ran.size(), static_cast<std::size_t>(kKeys));
  for (const auto& [k, n] : ran) {
    EXPECT_EQ(n, 1) << k;
    ASSERT_EQ(got[k].size(), static_cast<std::size_t>(kThreads)) << k;
    for (const std::string& v : got[k]) EXPECT_EQ(v, got[k].front()) << k;
  }
}

TEST_F(SqliteGroupTest, EightThreadsOnOneStoreRunEachKeyOnce) {
  SqliteStore store{options()};
  race({&store}, "one-store");
  const StoreStats s = store.stats();
  ASSERT_TRUE(s.group);
  EXPECT_GT(s.group->calls, 0u);
}

TEST_F(SqliteGroupTest, EightStoresOnOneFileShareOneGroupAndRunEachKeyOnce) {
  std::vector<std::unique_ptr<SqliteStore>> owned;
  std::vector<SqliteStore*> stores;
  for (int i = 0; i < 8; ++i) {
    owned.push_back(std::make_unique<SqliteStore>(options()));
    stores.push_back(owned.back().get());
  }
  race(stores, "eight-stores");
  // One group for the file: every store reports the same figures.
  EXPECT_EQ(stores.front()->stats().group->calls, stores.back()->stats().group->calls);
  // Another prefix, or other settings, is another group.
  EXPECT_EQ(sql::file_group(options()), sql::file_group(options()));
  EXPECT_NE(sql::file_group(options()), sql::file_group(options(4000ms)));
  EXPECT_EQ(sql::file_group(SqliteStoreOptions{.path = db_.path(), .mode = SqlMode::transactional}),
            nullptr);
}

// A worker process of eight threads, SIGKILLed while its groups are being written: every call it
// reported answered is in the file with the value it reported (a group's calls return only after
// its COMMIT), and a key whose call it did not report answered is either absent, held by the dead
// process, or complete: never half-written.
TEST_F(SqliteGroupTest, AProcessKilledMidGroupLosesNothingItReported) {
  const Target target{Backend::sqlite, db_.path(), "idem_"};
  {
    SqliteStore store{options()};
    ASSERT_TRUE(store.ensure_schema());
  }
  Worker worker({"sqlite", db_.path(), "idem_", "lease", "race", "killed", "400", "1", "8"});
  std::map<std::string, std::string> reported;
  auto note = [&](const std::string& line) {
    std::istringstream in(line);
    std::string what, key, value;
    in >> what >> key >> value;
    if (what == "got") reported[key] = value;
  };
  while (reported.size() < 60) {
    const std::string line = worker.read_until("got ", 30s);
    ASSERT_FALSE(line.empty()) << "the worker stopped answering";
    note(line);
  }
  worker.kill9();
  for (const std::string& line : worker.finish(30s)) note(line);  // printed before the kill
  SqliteStore store{options()};
  IdempotencyGuard guard{store, Options{.scope = "killed"}};
  for (const auto& [key, value] : reported) {
    auto replay = guard.execute(key, [] { return std::string("ran again"); });
    ASSERT_TRUE(replay) << key << ": " << replay.message();
    EXPECT_FALSE(replay.executed()) << key;
    EXPECT_EQ(replay.value(), value) << key;
  }
  EXPECT_GT(count_records(target), 0);
}

// GroupCommitStore's queue bound on its own: a store whose first write blocks until the test lets
// it go; calls queued behind it past max_queue_wait answer store_unavailable while it still
// blocks, and the store never sees them.
class BlockingStore {
 public:
  Result<Claim> claim(const ClaimRequest& request) {
    {
      std::lock_guard lock(mutex_);
      written_.emplace_back(request.key);
    }
    gate_.wait();
    return Claim{.status = ClaimStatus::acquired, .fence = 1};
  }
  Status commit(const Ticket&, const Completion&) { return {}; }
  Status abort(const Ticket&) { return {}; }
  Status extend(const Ticket&, std::chrono::milliseconds) { return {}; }
  std::vector<Result<Claim>> claim_batch(std::span<const ClaimRequest> requests) {
    std::vector<Result<Claim>> out;
    for (const ClaimRequest& r : requests) out.push_back(claim(r));
    return out;
  }
  std::vector<Status> commit_batch(std::span<const CommitRequest> requests) {
    return std::vector<Status>(requests.size());
  }

  void open() { open_.set_value(); }
  std::vector<std::string> written() {
    std::lock_guard lock(mutex_);
    return written_;
  }

 private:
  std::promise<void> open_;
  std::shared_future<void> gate_ = open_.get_future().share();
  std::mutex mutex_;
  std::vector<std::string> written_;
};

TEST(GroupCommitQueueBoundTest, CallsQueuedPastTheirBoundAreAnsweredAndNeverWritten) {
  BlockingStore store;
  GroupCommitStore<BlockingStore> grouped(store, GroupCommitOptions{.max_queue_wait = 50ms});
  auto first = std::async(std::launch::async, [&] { return grouped.claim(request("first")); });
  ASSERT_TRUE(eventually([&] { return grouped.groups_in_flight() == 1; }));
  std::vector<std::future<Result<Claim>>> late;
  for (const char* key : {"late-1", "late-2", "late-3"}) {
    late.push_back(
        std::async(std::launch::async, [&grouped, key] { return grouped.claim(request(key)); }));
  }
  for (auto& f : late) {  // answered while the first group still blocks
    const Result<Claim> r = f.get();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), errc::store_unavailable) << why(r);
  }
  EXPECT_EQ(grouped.queued(), 0u);
  store.open();
  ASSERT_TRUE(first.get());
  const Result<Claim> after = grouped.claim(request("after"));
  ASSERT_TRUE(after);
  EXPECT_EQ(store.written(), (std::vector<std::string>{"first", "after"}));
}

}  // namespace
}  // namespace idem::testing
