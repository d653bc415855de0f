// The `idem` command end to end against real stores: a key left in progress by a SIGKILLed
// process is found and released, and the next call runs it under a larger fence; forget never
// lets a fence be reused; paging returns each of 10,000 keys once; every error path exits with
// its documented status. Also the admin API on the memory store.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "cli_run.hpp"
#include "idem/guard.hpp"
#include "idem/memory/admin.hpp"
#include "idem/memory/store.hpp"
#include "idem/sqlite/store.hpp"
#ifdef IDEM_TEST_WITH_POSTGRES
#include "idem/postgres/store.hpp"
#endif
#ifdef IDEM_TEST_WITH_REDIS
#include "idem/redis/client.hpp"
#include "idem/redis/store.hpp"
#endif

namespace {
using idem::testing::CliRun;
using idem::testing::idem_cli;
using idem::testing::q;
using idem::testing::slurp;

using namespace std::chrono_literals;

std::string unique_scope(const std::string& what) {
  static int n = 0;
  return "admin." + what + "." + std::to_string(getpid()) + "." + std::to_string(n++) + "." +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

class AdminCli : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "sqlite") {
      std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
      for (char& c : name) c = c == '/' ? '_' : c;
      path_ = "/tmp/idem_admin_test_" + std::to_string(getpid()) + "_" + name + ".db";
      std::filesystem::remove(path_);
      uri_ = "sqlite:" + path_;
    } else if (GetParam() == "postgres") {
      uri_ = env("IDEM_TEST_PG_URI");
      if (uri_.empty())
        GTEST_SKIP() << "IDEM_TEST_PG_URI is not set (scripts/test starts a server)";
    } else if (GetParam() == "redis_cluster") {
      const std::string seeds = env("IDEM_TEST_REDIS_CLUSTER_SEEDS");
      if (seeds.empty()) {
        GTEST_SKIP() << "IDEM_TEST_REDIS_CLUSTER_SEEDS is not set (scripts/lib/cluster.sh)";
      }
      // A TLS cluster's URI (rediss+cluster://, with its TLS settings) when cluster.sh gives one.
      uri_ = env("IDEM_TEST_REDIS_CLUSTER_URI");
      if (uri_.empty()) uri_ = "redis+cluster://" + seeds;
    } else {
      uri_ = env("IDEM_TEST_REDIS_URI");
      if (uri_.empty())
        GTEST_SKIP() << "IDEM_TEST_REDIS_URI is not set (scripts/test starts a server)";
    }
  }
  void TearDown() override {
    if (!path_.empty()) {
      for (const char* suffix : {"", "-wal", "-shm", "-fences"})
        std::filesystem::remove(path_ + suffix);
    }
  }

  // Calls `fn` with a guard on this backend's store.
  template <class Fn>
  void with_guard(const std::string& scope, Fn&& fn, idem::Options extra = {}) {
    extra.scope = scope;
    if (GetParam() == "sqlite") {
      idem::SqliteStore store{idem::SqliteStoreOptions{.path = path_}};
      idem::IdempotencyGuard guard{store, extra};
      fn(guard);
    }
#ifdef IDEM_TEST_WITH_POSTGRES
    if (GetParam() == "postgres") {
      idem::PostgresStore store{
          idem::PostgresStoreOptions{.connection = {.uri = uri_}, .pool = {.size = 2}}};
      idem::IdempotencyGuard guard{store, extra};
      fn(guard);
    }
#endif
#ifdef IDEM_TEST_WITH_REDIS
    if (GetParam() == "redis") {
      auto options = idem::redis::ConnectionOptions::from_uri(uri_);
      idem::RedisStore store{std::make_shared<idem::redis::Client>(options.value())};
      idem::IdempotencyGuard guard{store, extra};
      fn(guard);
    }
    if (GetParam() == "redis_cluster") {
      auto options = idem::redis::ClusterOptions::from_uri(uri_);
      idem::RedisStore store{std::make_shared<idem::redis::Client>(options.value())};
      idem::IdempotencyGuard guard{store, extra};
      fn(guard);
    }
#endif
  }

  std::string cli(const std::string& scope, const std::string& rest) {
    return "--store " + q(uri_) + " --scope " + q(scope) + " " + rest;
  }

  std::string path_;
  std::string uri_;
};

std::uint64_t json_number(const std::string& json, const std::string& field) {
  const std::regex re("\"" + field + "\":([0-9]+)");
  std::smatch m;
  if (!std::regex_search(json, m, re)) return 0;
  return std::stoull(m[1]);
}

TEST_P(AdminCli, KilledHolderIsListedReleasedAndRunAgainUnderALargerFence) {
  const std::string scope = unique_scope("killed");
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(pipefd[0]);
    with_guard(
        scope,
        [&](auto& guard) {
          auto attempt =
              guard.template begin<std::string>(idem::Key{"stuck", "tenant-1"}, "payload");
          const std::string fence = std::to_string(attempt.fence()) + "\n";
          (void)!write(pipefd[1], fence.data(), fence.size());
          for (;;) pause();  // killed while it holds the key
        },
        idem::Options{.lease = 600s});
    _exit(1);
  }
  close(pipefd[1]);
  char buf[64] = {};
  ASSERT_GT(read(pipefd[0], buf, sizeof buf - 1), 0);
  close(pipefd[0]);
  const std::uint64_t dead_fence = std::stoull(buf);
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);

  CliRun listed = idem_cli(cli(scope, "--json list --state in_progress"));
  ASSERT_EQ(listed.status, 0) << listed.err;
  EXPECT_NE(listed.out.find("\"id\":\"stuck\""), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("\"principal\":\"tenant-1\""), std::string::npos);
  EXPECT_EQ(json_number(listed.out, "fence"), dead_fence);

  // The lease (10 min) still runs: without a release the next call is refused.
  with_guard(scope, [&](auto& guard) {
    auto r = guard.execute(idem::Key{"stuck", "tenant-1"}, "payload", [] { return 1; });
    EXPECT_EQ(r.error(), idem::errc::in_progress);
  });
  CliRun refused = idem_cli(cli(scope, "release stuck --principal tenant-1"));
  EXPECT_EQ(refused.status, 2) << "release without --yes";
  CliRun released = idem_cli(cli(scope, "--json release stuck --principal tenant-1 --yes"));
  ASSERT_EQ(released.status, 0) << released.err;
  EXPECT_NE(released.out.find("\"released\":true"), std::string::npos) << released.out;

  std::uint64_t new_fence = 0;
  with_guard(scope, [&](auto& guard) {
    auto r = guard.execute(idem::Key{"stuck", "tenant-1"}, "payload", [&](idem::Context& ctx) {
      new_fence = ctx.fence();
      return 7;
    });
    ASSERT_TRUE(r.has_value()) << r.error().message();
    EXPECT_TRUE(r.recorded());
  });
  EXPECT_GT(new_fence, dead_fence);
  CliRun inspected = idem_cli(cli(scope, "--json inspect stuck --principal tenant-1"));
  ASSERT_EQ(inspected.status, 0) << inspected.err;
  EXPECT_NE(inspected.out.find("\"state\":\"completed\""), std::string::npos) << inspected.out;
  EXPECT_EQ(json_number(inspected.out, "fence"), new_fence);
  // A second release finds nothing held.
  EXPECT_EQ(idem_cli(cli(scope, "release stuck --principal tenant-1 --yes")).status, 5);
}

TEST_P(AdminCli, ForgetThenClaimNeverReusesAFence) {
  const std::string scope = unique_scope("forget");
  std::uint64_t last = 0;
  for (int round = 0; round < 3; ++round) {
    std::uint64_t fence = 0;
    int runs = 0;
    with_guard(
        scope,
        [&](auto& guard) {
          try {
            auto r = guard.execute(idem::Key{"order-1"}, "payload-" + std::to_string(round),
                                   [&](idem::Context& ctx) {
                                     ++runs;
                                     fence = ctx.fence();
                                     if (round == 1) throw std::runtime_error("card declined");
                                     return round;
                                   });
            (void)r;
          } catch (const std::runtime_error&) {  // round 1: remembered, then rethrown
          }
        },
        idem::Options{.remember_failures = true});
    ASSERT_EQ(runs, 1) << "round " << round << ": the forgotten key runs again";
    EXPECT_GT(fence, last);
    last = fence;
    if (round == 1) {
      CliRun failed = idem_cli(cli(scope, "inspect order-1"));
      ASSERT_EQ(failed.status, 0) << failed.err;
      EXPECT_NE(failed.out.find("card declined"), std::string::npos) << failed.out;
      CliRun listed = idem_cli(cli(scope, "--json list --state failed"));
      EXPECT_NE(listed.out.find("\"id\":\"order-1\""), std::string::npos) << listed.out;
    }
    CliRun forgot = idem_cli(cli(scope, "forget order-1 --yes"));
    ASSERT_EQ(forgot.status, 0) << forgot.err;
  }
  CliRun after = idem_cli(cli(scope, "--json inspect order-1"));
  EXPECT_EQ(json_number(after.out, "fence"), last) << "the forgotten record keeps its fence";
}

// Global options are read after the command too, where people type them; a forget says how long
// other processes' caches may still replay the record.
TEST_P(AdminCli, GlobalOptionsAfterTheCommandAndTheForgetsCacheNote) {
  const std::string scope = unique_scope("after");
  with_guard(scope, [&](auto& guard) {
    ASSERT_TRUE(guard.execute(idem::Key{"done"}, "p", [] { return 1; }).has_value());
  });
  CliRun listed =
      idem_cli("list --state completed --store " + q(uri_) + " --json --scope " + q(scope));
  ASSERT_EQ(listed.status, 0) << listed.err;
  EXPECT_NE(listed.out.find("\"id\":\"done\""), std::string::npos) << listed.out;
  CliRun forgot = idem_cli("forget done --yes --store " + q(uri_) + " --scope " + q(scope));
  ASSERT_EQ(forgot.status, 0) << forgot.err;
  EXPECT_NE(forgot.err.find("max_ttl"), std::string::npos) << forgot.err;
  EXPECT_EQ(forgot.out.find("max_ttl"), std::string::npos) << "the note goes to stderr";
}

TEST_P(AdminCli, PagingThroughTenThousandKeysReturnsEachOnce) {
  const std::string scope = unique_scope("paging");
  constexpr int kKeys = 10'000;
  with_guard(scope, [&](auto& guard) {
    for (int i = 0; i < kKeys; ++i) {
      auto r = guard.execute(idem::Key{"k-" + std::to_string(i)}, "p", [] { return 1; });
      ASSERT_TRUE(r.has_value());
    }
  });
  std::set<std::string> seen;
  std::string cursor;
  int pages = 0;
  const std::regex id_re("\"id\":\"(k-[0-9]+)\"");
  const std::regex cursor_re("\"next_cursor\":\"([^\"]*)\"");
  do {
    CliRun page =
        idem_cli(cli(scope, "--json list --state completed --limit 1500" +
                                (cursor.empty() ? std::string() : " --cursor " + cursor)));
    ASSERT_EQ(page.status, 0) << page.err;
    for (auto it = std::sregex_iterator(page.out.begin(), page.out.end(), id_re);
         it != std::sregex_iterator(); ++it) {
      EXPECT_TRUE(seen.insert((*it)[1]).second) << "returned twice: " << (*it)[1];
    }
    std::smatch m;
    ASSERT_TRUE(std::regex_search(page.out, m, cursor_re));
    cursor = m[1];
    ASSERT_LT(++pages, 20);
  } while (!cursor.empty());
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(kKeys));
  EXPECT_EQ(pages, 7);
  CliRun stats = idem_cli(cli(scope, "--json stats"));
  ASSERT_EQ(stats.status, 0) << stats.err;
  EXPECT_EQ(json_number(stats.out, "completed"), static_cast<std::uint64_t>(kKeys)) << stats.out;
}

TEST_P(AdminCli, ErrorPathsExitWithTheirDocumentedStatus) {
  const std::string scope = unique_scope("errors");
  with_guard(scope, [&](auto& guard) {
    ASSERT_TRUE(guard.execute(idem::Key{"done"}, "p", [] { return 1; }).has_value());
  });
  EXPECT_EQ(idem_cli(cli(scope, "inspect absent")).status, 5);
  CliRun done = idem_cli(cli(scope, "release done --yes"));
  EXPECT_EQ(done.status, 5) << "a completed key is not held";
  EXPECT_NE(done.err.find("completed"), std::string::npos) << done.err;
  EXPECT_EQ(idem_cli(cli(scope, "forget done")).status, 2);
  EXPECT_EQ(idem_cli(cli(scope, "list --state nonsense")).status, 2);
  EXPECT_EQ(idem_cli(cli(scope, "list --cursor zz")).status, 2);
  EXPECT_EQ(idem_cli("--store " + q(uri_) + " inspect done").status, 2) << "no --scope";
  EXPECT_EQ(idem_cli(cli(scope, "frobnicate")).status, 2);
  CliRun check = idem_cli(cli(scope, "schema check"));
  EXPECT_EQ(check.status, 0) << check.err;
  CliRun purge = idem_cli(cli(scope, "--json purge"));
  EXPECT_EQ(purge.status, 0) << purge.err;
}

std::string backend_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

std::vector<std::string> backends() {
  std::vector<std::string> out{"sqlite"};
#ifdef IDEM_TEST_WITH_POSTGRES
  out.emplace_back("postgres");
#endif
#ifdef IDEM_TEST_WITH_REDIS
  out.emplace_back("redis");
  out.emplace_back("redis_cluster");  // listing and counting visit every primary
#endif
  return out;
}

INSTANTIATE_TEST_SUITE_P(Stores, AdminCli, ::testing::ValuesIn(backends()), backend_name);

// --- Errors that need no store -------------------------------------------------------------------

TEST(AdminCliErrors, BadUriUnreachableStoresAndMissingTables) {
  CliRun bad = idem_cli("--store mysql://x --scope s list");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("unknown store URI"), std::string::npos) << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << "one line: " << bad.err;

  CliRun no_file = idem_cli("--store sqlite:/nonexistent/dir/x.db --scope s list");
  EXPECT_EQ(no_file.status, 3) << no_file.err;
  EXPECT_EQ(std::count(no_file.err.begin(), no_file.err.end(), '\n'), 1) << no_file.err;
  // Unreachable whatever its name says: a path with "schema" in it is still status 3.
  CliRun named = idem_cli("--store sqlite:/nonexistent/schema/x.db --scope s list");
  EXPECT_EQ(named.status, 3) << named.err;

  // A database without idem's tables.
  const std::string empty = "/tmp/idem_admin_test_empty_" + std::to_string(getpid()) + ".db";
  std::filesystem::remove(empty);
  ASSERT_EQ(std::system(("sqlite3 " + empty +
                         " 'CREATE TABLE other (x)' 2>/dev/null || python3 -c "
                         "\"import sqlite3; sqlite3.connect('" +
                         empty + "').execute('CREATE TABLE other (x)')\"")
                            .c_str()),
            0);
  CliRun missing = idem_cli("--store sqlite:" + empty + " --scope s list");
  EXPECT_EQ(missing.status, 4) << missing.err;
  EXPECT_NE(missing.err.find("idem_records"), std::string::npos) << missing.err;
  EXPECT_EQ(idem_cli("--store sqlite:" + empty + " schema check").status, 4);
  EXPECT_EQ(idem_cli("--store sqlite:" + empty + " schema migrate").status, 0);
  EXPECT_EQ(idem_cli("--store sqlite:" + empty + " --scope s list").status, 0);
  std::filesystem::remove(empty);

  // Nothing listens on port 1.
  CliRun pg =
      idem_cli("--store 'postgresql://idem@127.0.0.1:1/none?connect_timeout=2' --scope s list");
#ifdef IDEM_TEST_WITH_POSTGRES
  EXPECT_EQ(pg.status, 3) << pg.err;
#endif
  CliRun redis = idem_cli("--store redis://127.0.0.1:1 --scope s list");
#ifdef IDEM_TEST_WITH_REDIS
  EXPECT_EQ(redis.status, 3) << redis.err;
  EXPECT_EQ(std::count(redis.err.begin(), redis.err.end(), '\n'), 1) << redis.err;
  // A Redis URI that does not parse is a usage error (2), not an unreachable store (3), and
  // its password is not echoed (in IDEM_STORE: the arguments may not hold a password).
  ::setenv("IDEM_STORE", "redis://app:hunter2@h:port", 1);
  CliRun unparsable = idem_cli("--scope s list");
  ::unsetenv("IDEM_STORE");
  EXPECT_EQ(unparsable.status, 2) << unparsable.err;
  EXPECT_NE(unparsable.err.find("bad port"), std::string::npos) << unparsable.err;
  EXPECT_EQ(unparsable.err.find("hunter2"), std::string::npos) << unparsable.err;
  CliRun unparsable_cluster = idem_cli("--store redis+cluster://h:1/3 --scope s list");
  EXPECT_EQ(unparsable_cluster.status, 2) << unparsable_cluster.err;
#endif
}

// A row idem did not write (a state it never writes) is record_corrupt: exit status 1, named.
TEST(AdminCliErrors, ARecordIdemDidNotWriteExitsWithStatusOne) {
  const std::string path = "/tmp/idem_admin_test_corrupt_" + std::to_string(getpid()) + ".db";
  std::filesystem::remove(path);
  {
    idem::SqliteStore store{idem::SqliteStoreOptions{.path = path}};
    idem::IdempotencyGuard guard{store, idem::Options{.scope = "s"}};
    ASSERT_TRUE(guard.execute(idem::Key{"k"}, [] { return 1; }).has_value());
  }
  ASSERT_EQ(std::system(("python3 -c \"import sqlite3; c = sqlite3.connect('" + path +
                         "'); c.execute('UPDATE idem_records SET state = 9'); c.commit()\"")
                            .c_str()),
            0);
  CliRun inspected = idem_cli("--store sqlite:" + path + " --scope s inspect k");
  EXPECT_EQ(inspected.status, 1) << inspected.err;
  EXPECT_NE(inspected.err.find("state 9, which idem never writes"), std::string::npos)
      << inspected.err;
  for (const char* suffix : {"", "-wal", "-shm", "-fences"}) std::filesystem::remove(path + suffix);
}

TEST(AdminCliErrors, HelpOnEverySubcommand) {
  for (const char* sub : {"inspect", "list", "release", "forget", "purge", "schema", "stats"}) {
    CliRun help = idem_cli(std::string("--store x ") + sub + " --help");
    EXPECT_EQ(help.status, 0) << sub;
    EXPECT_NE(help.out.find("Usage"), std::string::npos) << sub << ": " << help.out;
  }
}

TEST(AdminCliErrors, SchemaPrintMatchesTheShippedSqlFiles) {
  auto without_comment = [](std::string s) { return s.substr(s.find('\n') + 1); };
  const std::string db = "/tmp/idem_admin_test_print_" + std::to_string(getpid()) + ".db";
  CliRun sqlite = idem_cli("--store sqlite:" + db + " schema print");
  EXPECT_EQ(sqlite.out, without_comment(slurp(IDEM_SHARE_DIR "/schema-sqlite.sql")));
  CliRun pg = idem_cli("--store postgresql://nowhere/db schema print");
#ifdef IDEM_TEST_WITH_POSTGRES
  EXPECT_EQ(pg.out, without_comment(slurp(IDEM_SHARE_DIR "/schema-postgresql.sql")));
#endif
}

// --- The admin API on the memory store -----------------------------------------------------------

TEST(MemoryAdmin, ReleaseKeepsTheFenceAndListingPages) {
  idem::MemoryStore store;
  idem::admin::MemoryAdmin admin{store};
  idem::IdempotencyGuard guard{store, idem::Options{.scope = "mem"}};
  auto held = guard.begin<int>(idem::Key{"held"}, "p");
  ASSERT_TRUE(held.acquired());
  const idem::Fence dead = held.fence();
  for (int i = 0; i < 250; ++i) {
    ASSERT_TRUE(
        guard.execute(idem::Key{"k" + std::to_string(i)}, "p", [] { return 1; }).has_value());
  }
  auto page = admin.list("mem", {.state = idem::admin::State::in_progress});
  ASSERT_TRUE(page.has_value());
  ASSERT_EQ(page->records.size(), 1u);
  EXPECT_EQ(page->records[0].id, "held");
  auto released = admin.release("mem", idem::Key{"held"}, 0);
  ASSERT_TRUE(released.has_value());
  EXPECT_TRUE(released->changed);
  // The released holder's commit is refused: the key is no longer its.
  auto late = held.commit(5);
  EXPECT_EQ(late.commit_error(), idem::errc::lease_lost);
  idem::Fence next = 0;
  ASSERT_TRUE(guard
                  .execute(idem::Key{"held"}, "other payload",
                           [&](idem::Context& ctx) {
                             next = ctx.fence();
                             return 2;
                           })
                  .has_value());
  EXPECT_GT(next, dead);

  std::set<std::string> ids;
  idem::admin::ListRequest request{.state = idem::admin::State::completed, .limit = 40};
  do {
    auto p = admin.list("mem", request);
    ASSERT_TRUE(p.has_value());
    for (const auto& r : p->records) EXPECT_TRUE(ids.insert(r.id).second) << r.id;
    request.cursor = p->next_cursor;
  } while (!request.cursor.empty());
  EXPECT_EQ(ids.size(), 251u);
}

}  // namespace
