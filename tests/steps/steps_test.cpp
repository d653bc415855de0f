// Steps (Context::step, atomic_step, step_key) beyond the conformance kit's cases: derived keys,
// misuse, atomic phases on the SQL stores, and handlers killed with SIGKILL between and inside
// their steps, then run again in a fresh process until they complete, or finished by a completer
// in another process (SQL stores, Redis, Redis Cluster).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "idem/engine/effective_key.hpp"
#include "idem/idem.hpp"
#include "sql/sql_test_support.hpp"
#ifdef IDEM_STEPS_WITH_REDIS
#include "idem/redis/store.hpp"
#include "redis/redis_cluster_support.hpp"
#include "redis/redis_test_support.hpp"
#endif

namespace idem::testing {
namespace {

using std::chrono::milliseconds;

TEST(StepKeyTest, IsStableForAKeyAndStepAndDistinctOtherwise) {
  const std::string k = derive_step_key("scope\x1fkey", "charge");
  EXPECT_EQ(k, derive_step_key("scope\x1fkey", "charge"));
  EXPECT_EQ(k.size(), 5u + 32u);
  EXPECT_EQ(k.rfind("idem-", 0), 0u);
  EXPECT_NE(k, derive_step_key("scope\x1fkey", "receipt"));
  EXPECT_NE(k, derive_step_key("scope\x1fkey2", "charge"));
  // Lengths are part of the input: moving bytes between key and step changes the key.
  EXPECT_NE(derive_step_key("ab", "c"), derive_step_key("a", "bc"));
}

TEST(StepKeyTest, ContextDerivesItFromTheEffectiveKey) {
  MemoryStore store;
  IdempotencyGuard guard{store, Options{.scope = "rides"}};
  std::string seen;
  auto out = guard.execute(Key("r-1", "alice"), [&](Context& ctx) {
    seen = ctx.step_key("charge");
    return 1;
  });
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(seen, derive_step_key(detail::EffectiveKey("rides", "alice", "r-1").view(), "charge"));
}

// A store without steps: the guard works, a step is a logic error.
struct PlainStore {
  MemoryStore inner;
  Result<Claim> claim(const ClaimRequest& r) { return inner.claim(r); }
  Status commit(const Ticket& t, const Completion& c) { return inner.commit(t, c); }
  Status abort(const Ticket& t) { return inner.abort(t); }
  Status extend(const Ticket& t, milliseconds l) { return inner.extend(t, l); }
};

TEST(StepMisuseTest, AStoreWithoutStepsOrTransactionsRefusesThem) {
  PlainStore plain;
  IdempotencyGuard guard{plain};
  EXPECT_THROW(
      (void)guard.execute("k", [](Context& ctx) { return ctx.step("a", [] { return 1; }); }),
      std::logic_error);
  MemoryStore memory;
  IdempotencyGuard memory_guard{memory};
  EXPECT_THROW((void)memory_guard.execute(
                   "k", [](Context& ctx) { return ctx.atomic_step("a", [] { return 1; }); }),
               std::logic_error);
}

TEST(StepMisuseTest, AStepThatThrowsIsNotRecordedAndRunsAgain) {
  MemoryStore store;
  IdempotencyGuard guard{store};
  int runs = 0;
  auto handler = [&](Context& ctx) {
    return ctx.step("flaky", [&] {
      if (++runs == 1) throw std::runtime_error("provider timeout");
      return runs;
    });
  };
  EXPECT_THROW((void)guard.execute("k", handler), std::runtime_error);
  auto out = guard.execute("k", handler);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out.value(), 2);
}

// ---- The completer --------------------------------------------------------------------------

// The rides on a memory store whose time the test moves; requests kept, as the completer needs.
class CompleterTest : public ::testing::Test {
 protected:
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  MemoryStore store{MemoryStoreOptions{.clock = clock}};
  const Options options{
      .scope = "rides", .lease = milliseconds{1000}, .clock = clock, .keep_request = true};
  IdempotencyGuard<MemoryStore> guard{store, options};
};

TEST_F(CompleterTest, FinishesARunWhoseHolderDiedAtItsFirstUnfinishedStep) {
  std::map<std::string, int> runs;
  auto handler = [&](Context& ctx, std::string_view request, bool die) {
    const std::string ride =
        ctx.step("create", [&] { return "ride-" + std::to_string(++runs["create"]); });
    ctx.step("charge", [&] { ++runs["charge"]; });
    if (die) throw std::runtime_error("the holder died");  // as a crash leaves it: no commit
    ctx.step("receipt", [&] { ++runs["receipt"]; });
    return ride + ":" + std::string(request);
  };
  // The holder dies after two steps; its key stays held until its lease runs out.
  auto dying = guard.begin<std::string>("r-1", "from=A;to=B");
  ASSERT_TRUE(dying.acquired());
  EXPECT_THROW(handler(dying.context(), "from=A;to=B", true), std::runtime_error);

  Completer completer(store, options, [&](Context& ctx, std::string_view request) {
    return handler(ctx, request, false);
  });
  Result<CompleterPass> early = completer.run_once();
  ASSERT_TRUE(early.has_value());
  EXPECT_EQ(early->found, 0u) << "a live lease is not abandoned";

  clock->advance(milliseconds{1500});
  Result<CompleterPass> pass = completer.run_once();
  ASSERT_TRUE(pass.has_value());
  EXPECT_EQ(pass->found, 1u);
  EXPECT_EQ(pass->completed, 1u);
  EXPECT_EQ(runs["create"], 1);
  EXPECT_EQ(runs["charge"], 1);
  EXPECT_EQ(runs["receipt"], 1);

  // The client's retry replays what the completer committed; nothing is left to complete.
  auto retry = guard.execute("r-1", "from=A;to=B",
                             [&](Context& ctx) { return handler(ctx, "from=A;to=B", false); });
  ASSERT_TRUE(retry.has_value());
  EXPECT_TRUE(retry.replayed());
  EXPECT_EQ(retry.value(), "ride-1:from=A;to=B");
  EXPECT_EQ(completer.run_once()->found, 0u);
  dying.fail("gone");  // the dead holder's late settle changes nothing
  EXPECT_TRUE(guard.execute("r-1", "from=A;to=B", [] { return std::string("x"); }).replayed());
}

TEST_F(CompleterTest, GivesUpAfterMaxAttemptsAndRecordsTheFailure) {
  EXPECT_THROW(
      (void)guard.execute("r-2", "req", [](Context&) -> int { throw std::runtime_error("down"); }),
      std::runtime_error);
  int tries = 0;
  Completer completer(
      store, options,
      [&](Context&, std::string_view) -> int {
        ++tries;
        throw std::runtime_error("provider still down");
      },
      CompleterOptions{.concurrency = 2,
                       .max_attempts = 3,
                       .initial_backoff = milliseconds{100},
                       .max_backoff = milliseconds{400}});
  std::size_t gave_up = 0;
  for (int pass = 0; pass < 10 && gave_up == 0; ++pass) {
    Result<CompleterPass> p = completer.run_once();
    ASSERT_TRUE(p.has_value());
    gave_up += p->gave_up;
    clock->advance(milliseconds{500});
  }
  EXPECT_EQ(gave_up, 1u);
  EXPECT_EQ(tries, 3);
  auto replay = guard.execute("r-2", "req", [] { return 0; });
  EXPECT_TRUE(replay.replayed());
  EXPECT_EQ(replay.error(), errc::handler_failed);
  EXPECT_NE(replay.message().find("gave up after 3"), std::string::npos) << replay.message();
  EXPECT_EQ(completer.run_once()->found, 0u);
}

TEST_F(CompleterTest, KeepRequestNeedsAStoreThatKeepsThem) {
  PlainStore plain;
  EXPECT_THROW(IdempotencyGuard(plain, Options{.keep_request = true}), std::invalid_argument);
}

// ---- SQL stores: atomic phases and crashes ----------------------------------------------------

// A store of one backend and mode on a database that lives as long as the test.
struct SqlTarget {
  Backend backend;
  SqlMode mode;
  std::string where;   // SQLite file or PostgreSQL URI
  std::string prefix;  // tables of this test alone

  std::unique_ptr<SqlStore> open() const {
    if (backend == Backend::sqlite) {
      return std::make_unique<SqliteStore>(
          SqliteStoreOptions{.path = where, .mode = mode, .table_prefix = prefix});
    }
    return std::make_unique<PostgresStore>(PostgresStoreOptions{
        .connection = {.uri = where, .table_prefix = prefix}, .mode = mode, .pool = {.size = 2}});
  }
  std::string rides() const { return prefix + "rides"; }

  // Business writes through the step's transaction.
  void insert_ride(Context& ctx, const std::string& key) const {
    if (backend == Backend::sqlite) {
      SQLite::Statement st(sqlite_transaction(ctx), "INSERT INTO " + rides() + " (k) VALUES (?1)");
      st.bind(1, key);
      st.exec();
    } else {
      pg_transaction(ctx).exec_params("INSERT INTO " + rides() + " (k) VALUES ($1)", key);
    }
  }
  void create_rides_table() const {
    const std::string ddl = "CREATE TABLE IF NOT EXISTS " + rides() + " (k TEXT NOT NULL)";
    if (backend == Backend::sqlite) {
      SQLite::Database db(where, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
      db.exec(ddl);
    } else {
      pqxx::connection c(where);
      pqxx::nontransaction(c).exec(ddl);
    }
  }
  std::map<std::string, int> ride_counts() const {
    std::map<std::string, int> counts;
    const std::string q = "SELECT k FROM " + rides();
    if (backend == Backend::sqlite) {
      SQLite::Database db(where, SQLite::OPEN_READONLY);
      SQLite::Statement st(db, q);
      while (st.executeStep()) ++counts[st.getColumn(0).getString()];
    } else {
      pqxx::connection c(where);
      for (const auto& row : pqxx::nontransaction(c).exec(q)) ++counts[row[0].c_str()];
    }
    return counts;
  }
};

std::string unique_prefix() {
  static int n = 0;
  return "st" + std::to_string(::getpid()) + "_" + std::to_string(n++) + "_";
}

// Both SQL backends in each of `modes`, and the test names they give ("sqlite_lease", ...).
template <class... Modes>
auto sql_params(Modes... modes) {
  return ::testing::Combine(::testing::Values(Backend::sqlite, Backend::postgres),
                            ::testing::Values(modes...));
}
std::string sql_param_name(const ::testing::TestParamInfo<std::tuple<Backend, SqlMode>>& info) {
  return std::string(name_of(std::get<0>(info.param))) + "_" + name_of(std::get<1>(info.param));
}

class AtomicPhaseTest : public ::testing::TestWithParam<std::tuple<Backend, SqlMode>> {
 protected:
  void SetUp() override {
    const auto [backend, mode] = GetParam();
    if (backend == Backend::postgres) {
      const auto uri = pg_uri();
      if (!uri) GTEST_SKIP() << kNoPgMessage;
      target_ = SqlTarget{backend, mode, *uri, unique_prefix()};
    } else {
      db_ = std::make_unique<TempDb>();
      target_ = SqlTarget{backend, mode, db_->path(), unique_prefix()};
    }
    target_.create_rides_table();
  }
  std::unique_ptr<TempDb> db_;
  SqlTarget target_;
};

TEST_P(AtomicPhaseTest, AStepsWritesCommitWithItsRecordOrNotAtAll) {
  std::unique_ptr<SqlStore> store = target_.open();
  IdempotencyGuard guard{*store, Options{.scope = "atomic"}};
  int creates = 0;
  bool fail_inside = true;
  bool fail_after = true;
  auto handler = [&](Context& ctx) {
    const int ride = ctx.atomic_step("create", [&](Context& c) {
      target_.insert_ride(c, "r-1");
      if (fail_inside) throw std::runtime_error("failed inside the phase");
      return ++creates;
    });
    if (fail_after) throw std::runtime_error("failed after the phase");
    return ride;
  };
  EXPECT_THROW((void)guard.execute("r-1", handler), std::runtime_error);
  EXPECT_EQ(target_.ride_counts()["r-1"], 0) << "the failed phase's write stayed";
  fail_inside = false;
  EXPECT_THROW((void)guard.execute("r-1", handler), std::runtime_error);
  fail_after = false;
  auto out = guard.execute("r-1", handler);
  ASSERT_TRUE(out.has_value()) << out.error().message();
  EXPECT_EQ(target_.ride_counts()["r-1"], 1);
  if (target_.mode == SqlMode::lease) {
    EXPECT_EQ(out.value(), 1) << "the committed phase ran again";
  }
}

// Lease mode only: a live transactional holder is never taken over.
class LeaseAtomicPhaseTest : public AtomicPhaseTest {};

TEST_P(LeaseAtomicPhaseTest, AStaleHolderPhaseRollsBack) {
  std::unique_ptr<SqlStore> store = target_.open();
  const std::string key = "stale/" + target_.prefix;
  Result<Claim> first = store->claim(
      ClaimRequest{.key = key, .lease = milliseconds{150}, .retention = std::chrono::hours{1}});
  ASSERT_TRUE(first.has_value());
  ::usleep(300'000);
  Result<Claim> second = store->claim(
      ClaimRequest{.key = key, .lease = milliseconds{10'000}, .retention = std::chrono::hours{1}});
  ASSERT_TRUE(second.has_value());
  ASSERT_EQ(second->status, ClaimStatus::acquired);
  Context stale(*store, Ticket{key, first->fence}, milliseconds{1000});
  try {
    stale.atomic_step("create", [&](Context& c) { target_.insert_ride(c, "stale"); });
    ADD_FAILURE() << "a stale holder's phase committed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::lease_lost);
  }
  EXPECT_EQ(target_.ride_counts()["stale"], 0);
}

INSTANTIATE_TEST_SUITE_P(Sql, AtomicPhaseTest, sql_params(SqlMode::lease, SqlMode::transactional),
                         sql_param_name);

INSTANTIATE_TEST_SUITE_P(Sql, LeaseAtomicPhaseTest, sql_params(SqlMode::lease), sql_param_name);

// Where a run of the rides handler kills its own process.
enum class DieAt {
  nowhere,
  inside_create,  // after the ride's insert, before the phase commits
  after_create,   // between create and charge
  inside_charge,  // after the provider charged, before the step is recorded
  after_charge,   // between charge and receipt
  after_receipt,  // after the last step, before the record commits
};

constexpr DieAt kDeaths[] = {DieAt::inside_create, DieAt::after_create, DieAt::inside_charge,
                             DieAt::after_charge, DieAt::after_receipt};

// Appends one line to `path` with one write(2) (O_APPEND: whole lines from every process).
void append_line(const std::string& path, const std::string& line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return;
  const std::string text = line + "\n";
  (void)!::write(fd, text.data(), text.size());
  ::close(fd);
}

// The rides steps: create the ride (`create(ctx, die_at)` takes the first step), charge (an
// outside call, logged with its step key), send the receipt; kills its own process at `die`.
template <class Create>
std::string ride_steps(const std::string& effects, const std::string& key, Context& ctx, DieAt die,
                       Create create) {
  auto die_at = [&](DieAt here) {
    if (here == die) ::kill(::getpid(), SIGKILL);
  };
  create(ctx, die_at);
  die_at(DieAt::after_create);
  const std::string charge = ctx.step("charge", [&] {
    append_line(effects, "charge " + key + " " + ctx.step_key("charge"));
    die_at(DieAt::inside_charge);
    return std::string("ch_") + key;
  });
  die_at(DieAt::after_charge);
  ctx.step("receipt", [&] { append_line(effects, "receipt " + key); });
  die_at(DieAt::after_receipt);
  return charge;
}

// The rides handler on SQL: the ride's row is written in an atomic phase.
std::string rides_handler(const SqlTarget& target, const std::string& effects,
                          const std::string& key, Context& ctx, DieAt die) {
  return ride_steps(effects, key, ctx, die, [&](Context& c, auto& die_at) {
    c.atomic_step("create", [&](Context& phase) {
      target.insert_ride(phase, key);
      die_at(DieAt::inside_create);
    });
  });
}

Options rides_options() {
  return Options{.scope = "rides",
                 .lease = milliseconds{300},
                 .in_progress = Wait{.timeout = milliseconds{8000}},
                 .keep_request = true};
}

// Runs `body` (returning an exit code) in a forked child; returns the child's status.
template <class Body>
int in_child(Body body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int code = 0;
    try {
      code = body();
    } catch (...) {
      code = 4;
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

// One run of the rides handler for `key` in a forked child, dying at `die`; returns its status.
int run_in_child(const SqlTarget& target, const std::string& effects, const std::string& key,
                 DieAt die) {
  return in_child([&] {
    std::unique_ptr<SqlStore> store = target.open();
    IdempotencyGuard guard{*store, rides_options()};
    auto out = guard.execute(
        key, key, [&](Context& ctx) { return rides_handler(target, effects, key, ctx, die); });
    return out.has_value() && out.value() == "ch_" + key ? 0 : 3;
  });
}

// What the effects log says: charges and receipts per key, and the step keys the charges used.
struct Effects {
  std::map<std::string, int> creates, charges, receipts;
  std::map<std::string, std::set<std::string>> charge_keys;

  explicit Effects(const std::string& path) {
    std::ifstream in(path);
    for (std::string what, key; in >> what >> key;) {
      if (what == "charge") {
        std::string step_key;
        in >> step_key;
        ++charges[key];
        charge_keys[key].insert(step_key);
      } else if (what == "create") {
        ++creates[key];
      } else {
        ++receipts[key];
      }
    }
  }
};

class CrashTest : public AtomicPhaseTest {};

TEST_P(CrashTest, KilledBetweenAndInsideStepsEveryPhaseHappensOnceAndNoRecordedStepRunsAgain) {
  const std::string effects = (db_ ? db_->path() : "/tmp/" + target_.prefix) + ".effects";
  ::unlink(effects.c_str());
  {
    std::unique_ptr<SqlStore> store = target_.open();  // the schema, before the children race
    ASSERT_TRUE(store->ensure_schema().ok());
  }
  for (DieAt die : kDeaths) {
    const std::string key = "ride-" + std::to_string(static_cast<int>(die));
    const int killed = run_in_child(target_, effects, key, die);
    ASSERT_TRUE(WIFSIGNALED(killed) && WTERMSIG(killed) == SIGKILL) << key;
    const int finished = run_in_child(target_, effects, key, DieAt::nowhere);
    ASSERT_TRUE(WIFEXITED(finished) && WEXITSTATUS(finished) == 0) << key << " status " << finished;
    // A third run replays.
    const int replayed = run_in_child(target_, effects, key, DieAt::nowhere);
    ASSERT_TRUE(WIFEXITED(replayed) && WEXITSTATUS(replayed) == 0) << key;
  }

  const std::map<std::string, int> rides = target_.ride_counts();
  Effects log(effects);
  auto& charges = log.charges;
  auto& receipts = log.receipts;
  auto& charge_keys = log.charge_keys;
  for (DieAt die : kDeaths) {
    const std::string key = "ride-" + std::to_string(static_cast<int>(die));
    SCOPED_TRACE(key);
    EXPECT_EQ(rides.count(key) ? rides.at(key) : 0, 1) << "the atomic phase did not happen once";
    const bool transactional = target_.mode == SqlMode::transactional;
    EXPECT_EQ(receipts[key], transactional && die == DieAt::after_receipt ? 2 : 1);
    // The derived key is the same in every process, and the one the guard's key derives.
    ASSERT_EQ(charge_keys[key].size(), 1u);
    EXPECT_EQ(*charge_keys[key].begin(),
              derive_step_key(detail::EffectiveKey("rides", "", key).view(), "charge"));
    // A recorded step never runs again. Killed inside the charge, it was not recorded: it ran
    // twice, under the same step key, which the provider deduplicates. In transactional mode a
    // crash rolls the recorded steps back with the record.
    const bool recorded_before_death = die == DieAt::after_charge || die == DieAt::after_receipt;
    const int expected =
        die == DieAt::inside_charge || (transactional && recorded_before_death) ? 2 : 1;
    EXPECT_EQ(charges[key], expected);
  }
}

INSTANTIATE_TEST_SUITE_P(Sql, CrashTest, sql_params(SqlMode::lease, SqlMode::transactional),
                         sql_param_name);

// Lease mode: the holders die and no client retries; a completer in another process finishes
// every key, resuming at its first unfinished step.
class CompleterCrashTest : public AtomicPhaseTest {};

// Passes of `completer` until it has completed `expected` runs or 20 s have gone by; how many
// it completed (a failed pass fails the test and ends the passes).
template <class S>
std::size_t complete_within_20s(Completer<S>& completer, std::size_t expected) {
  std::size_t completed = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{20};
  while (completed < expected && std::chrono::steady_clock::now() < deadline) {
    Result<CompleterPass> pass = completer.run_once();
    if (!pass) {
      ADD_FAILURE() << pass.failure().describe();
      break;
    }
    completed += pass->completed;
    ::usleep(50'000);
  }
  return completed;
}
TEST_P(CompleterCrashTest, FinishesTheKeysOfHoldersKilledBetweenAndInsideSteps) {
  const std::string effects = (db_ ? db_->path() : "/tmp/" + target_.prefix) + ".effects";
  ::unlink(effects.c_str());
  {
    std::unique_ptr<SqlStore> store = target_.open();
    ASSERT_TRUE(store->ensure_schema().ok());
  }
  for (DieAt die : kDeaths) {
    const std::string key = "ride-" + std::to_string(static_cast<int>(die));
    const int killed = run_in_child(target_, effects, key, die);
    ASSERT_TRUE(WIFSIGNALED(killed) && WTERMSIG(killed) == SIGKILL) << key;
  }
  std::unique_ptr<SqlStore> store = target_.open();
  Completer completer(*store, rides_options(), [&](Context& ctx, std::string_view request) {
    return rides_handler(target_, effects, std::string(request), ctx, DieAt::nowhere);
  });
  const std::size_t completed = complete_within_20s(completer, std::size(kDeaths));
  EXPECT_EQ(completed, std::size(kDeaths));
  EXPECT_EQ(completer.run_once()->found, 0u);

  const std::map<std::string, int> rides = target_.ride_counts();
  Effects log(effects);
  for (DieAt die : kDeaths) {
    const std::string key = "ride-" + std::to_string(static_cast<int>(die));
    SCOPED_TRACE(key);
    EXPECT_EQ(rides.count(key) ? rides.at(key) : 0, 1);
    EXPECT_EQ(log.receipts[key], 1);
    EXPECT_EQ(log.charges[key], die == DieAt::inside_charge ? 2 : 1);
    EXPECT_EQ(log.charge_keys[key].size(), 1u);
    // The client's late retry replays the completer's result.
    const int replayed = run_in_child(target_, effects, key, DieAt::nowhere);
    EXPECT_TRUE(WIFEXITED(replayed) && WEXITSTATUS(replayed) == 0);
  }
  EXPECT_EQ(Effects(effects).receipts, log.receipts) << "a replay ran a step";
}

INSTANTIATE_TEST_SUITE_P(Sql, CompleterCrashTest, sql_params(SqlMode::lease), sql_param_name);

#ifdef IDEM_STEPS_WITH_REDIS
// ---- Redis: a completer in another process finishes the keys of killed holders ---------------

enum class RedisKind { server, cluster };

std::shared_ptr<redis::Client> redis_client(RedisKind kind) {
  if (kind == RedisKind::cluster) return std::make_shared<redis::Client>(cluster_options());
  return std::make_shared<redis::Client>(redis_options());
}

// The rides handler on Redis: creating the ride is a step like the others, logged.
std::string redis_rides_handler(const std::string& effects, const std::string& key, Context& ctx,
                                DieAt die) {
  return ride_steps(effects, key, ctx, die, [&](Context& c, auto& die_at) {
    c.step("create", [&] {
      append_line(effects, "create " + key);
      die_at(DieAt::inside_create);
    });
  });
}

int run_redis_in_child(RedisKind kind, const std::string& prefix, const std::string& effects,
                       const std::string& key, DieAt die) {
  return in_child([&] {
    RedisStore store(redis_client(kind), RedisStoreOptions{.prefix = prefix});
    IdempotencyGuard guard{store, rides_options()};
    auto out = guard.execute(
        key, key, [&](Context& ctx) { return redis_rides_handler(effects, key, ctx, die); });
    return out.has_value() && out.value() == "ch_" + key ? 0 : 3;
  });
}

class RedisCompleterCrashTest : public ::testing::TestWithParam<RedisKind> {};

TEST_P(RedisCompleterCrashTest, FinishesTheKeysOfHoldersKilledBetweenAndInsideSteps) {
  const RedisKind kind = GetParam();
  if (kind == RedisKind::server && redis_uri() == nullptr) {
    GTEST_SKIP() << "IDEM_TEST_REDIS_URI is not set; scripts/test starts a Redis and sets it";
  }
  if (kind == RedisKind::cluster && cluster_seeds() == nullptr) {
    GTEST_SKIP() << "IDEM_TEST_REDIS_CLUSTER_SEEDS is not set; scripts/test starts a cluster";
  }
  const std::string prefix = idem::testing::unique_prefix("steps");
  const std::string effects = "/tmp/idem-steps-redis-" + std::to_string(::getpid()) + "-" +
                              std::to_string(static_cast<int>(kind)) + ".effects";
  ::unlink(effects.c_str());
  for (DieAt die : kDeaths) {
    const std::string key = "ride-" + std::to_string(static_cast<int>(die));
    const int killed = run_redis_in_child(kind, prefix, effects, key, die);
    ASSERT_TRUE(WIFSIGNALED(killed) && WTERMSIG(killed) == SIGKILL) << key << " status " << killed;
  }
  RedisStore store(redis_client(kind), RedisStoreOptions{.prefix = prefix});
  Completer completer(store, rides_options(), [&](Context& ctx, std::string_view request) {
    return redis_rides_handler(effects, std::string(request), ctx, DieAt::nowhere);
  });
  const std::size_t completed = complete_within_20s(completer, std::size(kDeaths));
  EXPECT_EQ(completed, std::size(kDeaths));
  EXPECT_EQ(completer.run_once()->found, 0u);

  Effects log(effects);
  for (DieAt die : kDeaths) {
    const std::string key = "ride-" + std::to_string(static_cast<int>(die));
    SCOPED_TRACE(key);
    // A step killed inside ran again (not recorded); a recorded step never ran again.
    EXPECT_EQ(log.creates[key], die == DieAt::inside_create ? 2 : 1);
    EXPECT_EQ(log.charges[key], die == DieAt::inside_charge ? 2 : 1);
    EXPECT_EQ(log.receipts[key], 1);
    ASSERT_EQ(log.charge_keys[key].size(), 1u);
    EXPECT_EQ(*log.charge_keys[key].begin(),
              derive_step_key(detail::EffectiveKey("rides", "", key).view(), "charge"));
    // The client's late retry replays the completer's result.
    const int replayed = run_redis_in_child(kind, prefix, effects, key, DieAt::nowhere);
    EXPECT_TRUE(WIFEXITED(replayed) && WEXITSTATUS(replayed) == 0) << "status " << replayed;
  }
  EXPECT_EQ(Effects(effects).receipts, log.receipts) << "a replay ran a step";
  ::unlink(effects.c_str());
}

INSTANTIATE_TEST_SUITE_P(Redis, RedisCompleterCrashTest,
                         ::testing::Values(RedisKind::server, RedisKind::cluster),
                         [](const auto& info) {
                           return info.param == RedisKind::server ? "server" : "cluster";
                         });
#endif  // IDEM_STEPS_WITH_REDIS

}  // namespace
}  // namespace idem::testing
