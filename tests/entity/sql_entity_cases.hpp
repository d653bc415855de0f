#pragma once
// Cases of the entity stores that only SQL can have: other processes racing on the same order,
// a holder SIGKILLed inside its handler, and table names refused at configuration. The SQLite and
// PostgreSQL test files instantiate them with their target.

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <sstream>

#include "entity/entity_store_suite.hpp"
#include "entity/sql_targets.hpp"
#include "support/child_process.hpp"
#include "support/fence_ledger.hpp"

#ifndef IDEM_ENTITY_WORKER
#error "IDEM_ENTITY_WORKER must name the idem_entity_worker binary"
#endif

namespace idem::testing {

/// An idem_entity_worker process (support/child_process.hpp).
class EntityWorker : public ChildProcess {
 public:
  explicit EntityWorker(std::vector<std::string> args)
      : ChildProcess(IDEM_ENTITY_WORKER, std::move(args)) {}
};

template <class T>
class EntityProcessTest : public EntityStoreTest<T> {
 protected:
  std::vector<std::string> args(const std::string& cmd, const std::string& entity,
                                int threads = 1) const {
    return {T::kName, this->target_.location(), this->target_.names().prefix, cmd,
            entity,   std::to_string(threads)};
  }
};

TYPED_TEST_SUITE_P(EntityProcessTest);

TYPED_TEST_P(EntityProcessTest, FourProcessesPayingOneOrderRunTheHandlerOnce) {
  auto store = this->orders();
  auto& t = this->target_;
  t.create_order(*store, "o-proc");
  ASSERT_TRUE(store->state("o-proc").has_value());  // creates the op log before the race
  std::vector<std::unique_ptr<EntityWorker>> workers;
  for (int p = 0; p < 4; ++p) {
    workers.push_back(std::make_unique<EntityWorker>(this->args("pay", "o-proc", 2)));
  }
  int ran = 0;
  std::vector<std::string> got;
  for (auto& w : workers) {
    for (const std::string& line : w->lines(std::chrono::seconds{60})) {
      if (line == "ran") ++ran;
      if (line.rfind("got ", 0) == 0) got.push_back(line.substr(4));
      if (line.rfind("err ", 0) == 0) ADD_FAILURE() << line;
    }
    EXPECT_TRUE(w->exited_cleanly());
  }
  EXPECT_EQ(ran, 1);
  ASSERT_EQ(got.size(), 8u);
  for (const std::string& v : got) EXPECT_EQ(v, got.front());
  EXPECT_EQ(t.effects("paid o-proc"), 1);
  EXPECT_EQ(store->state("o-proc").value(), "PAID");
}

TYPED_TEST_P(EntityProcessTest, AHolderKilledInsideItsHandlerLeavesNoTrace) {
  auto store = this->orders();
  auto accounts = this->accounts();
  auto& t = this->target_;
  t.create_order(*store, "o-kill");
  t.create_account(*accounts, "a-kill", 300);
  {
    EntityWorker w(this->args("hold-pay", "o-kill"));
    const auto lines = w.lines(std::chrono::seconds{20}, "inside");
    ASSERT_FALSE(lines.empty()) << "worker never ran its handler";
    ASSERT_EQ(lines.back(), "inside");
    w.kill9();
  }
  EXPECT_EQ(store->state("o-kill").value(), "CREATED");
  EXPECT_EQ(t.effects("pay-killed"), 0);
  {
    EntityWorker w(this->args("hold-debit", "a-kill"));
    const auto lines = w.lines(std::chrono::seconds{20}, "inside");
    ASSERT_FALSE(lines.empty()) << "worker never ran its handler";
    ASSERT_EQ(lines.back(), "inside");
    w.kill9();
  }
  EXPECT_EQ(accounts->version("a-kill").value(), 0u);
  EXPECT_EQ(t.balance("a-kill"), 300);
  EXPECT_EQ(t.effects("debit-killed"), 0);

  // Nothing was recorded: the same operations now run, once.
  int runs = 0;
  auto pay = store->execute(EventKey{"o-kill", "PAY"}, [&] { return ++runs; });
  ASSERT_TRUE(pay.has_value()) << pay.message();
  EXPECT_TRUE(pay.executed());
  auto debit = accounts->execute(VersionKey{"a-kill", 0}, [&] { return ++runs; });
  ASSERT_TRUE(debit.has_value()) << debit.message();
  EXPECT_TRUE(debit.executed());
  EXPECT_EQ(runs, 2);
}

// Fences across processes: PAY handlers append their fence to a ledger file outside the store
// after an effect in the claim's transaction, which rolls back when they throw. The fences an
// operation's holders see must grow in the order they held it, whatever process they ran in and
// however the earlier ones ended.

/// The ledger of one test, beside its files (removed with them on SQLite).
inline std::string fence_ledger_path(const std::string& stem) {
  return (std::filesystem::temp_directory_path() / (unique_name(stem) + ".ledger")).string();
}

struct LedgerFile {
  std::string path = fence_ledger_path("idem_entity_fences");
  ~LedgerFile() {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
  }
};

TYPED_TEST_P(EntityProcessTest, ProcessesTakingTurnsWhoseHandlersThrowSeeGrowingFences) {
  auto store = this->orders();
  auto& t = this->target_;
  t.create_order(*store, "o-turns");
  LedgerFile ledger;
  std::vector<std::uint64_t> seen;
  for (int turn = 0; turn < 4; ++turn) {
    const bool last = turn == 3;
    auto args = this->args("fence-turn", "o-turns");
    args.back() = ledger.path;  // in place of the thread count
    args.push_back(last ? "commit" : "throw");
    EntityWorker w(args);
    const std::vector<std::string> lines = w.lines(std::chrono::seconds{60});
    EXPECT_TRUE(w.exited_cleanly());
    ASSERT_EQ(lines.size(), 2u) << ::testing::PrintToString(lines);
    ASSERT_EQ(lines[0].rfind("fence ", 0), 0u) << lines[0];
    seen.push_back(std::stoull(lines[0].substr(6)));
    EXPECT_EQ(lines[1], last ? "done" : "threw");
  }
  EXPECT_TRUE(strictly_growing(seen)) << ::testing::PrintToString(seen);
  EXPECT_EQ(ledger_entries(ledger.path), seen);
  EXPECT_EQ(t.effects("fenced o-turns"), 1);  // the thrown runs' effects rolled back
  EXPECT_EQ(store->state("o-turns").value(), "PAID");
}

TYPED_TEST_P(EntityProcessTest, ProcessesRacingOnOneOperationNeverShareAFence) {
  auto store = this->orders();
  auto& t = this->target_;
  t.create_order(*store, "o-race");
  ASSERT_TRUE(store->state("o-race").has_value());  // creates the op log before the race
  LedgerFile ledger;
  constexpr int kProcesses = 4, kRounds = 6;
  std::vector<std::unique_ptr<EntityWorker>> workers;
  for (int p = 0; p < kProcesses; ++p) {
    auto args = this->args("fence-race", "o-race");
    args.back() = std::to_string(kRounds);
    args.push_back(ledger.path);
    workers.push_back(std::make_unique<EntityWorker>(args));
  }
  for (auto& w : workers) {
    for (const std::string& line : w->lines(std::chrono::seconds{120})) ADD_FAILURE() << line;
    EXPECT_TRUE(w->exited_cleanly());
  }
  const std::vector<std::uint64_t> fences = ledger_entries(ledger.path);
  EXPECT_EQ(fences.size(), static_cast<std::size_t>(kProcesses * kRounds));
  EXPECT_TRUE(strictly_growing(fences)) << ::testing::PrintToString(fences);
  EXPECT_EQ(store->state("o-race").value(), "CREATED");
}

TYPED_TEST_P(EntityProcessTest, AHolderKilledMidHandlerIsFollowedByALargerFence) {
  auto store = this->orders();
  auto& t = this->target_;
  t.create_order(*store, "o-fkill");
  LedgerFile ledger;
  std::uint64_t dead = 0;
  {
    auto args = this->args("hold-fence", "o-fkill");
    args.back() = ledger.path;
    EntityWorker w(args);
    const auto lines = w.lines(std::chrono::seconds{20}, "inside");
    ASSERT_EQ(lines.size(), 2u) << "worker never ran its handler";
    ASSERT_EQ(lines[0].rfind("fence ", 0), 0u) << lines[0];
    dead = std::stoull(lines[0].substr(6));
    w.kill9();
  }
  auto args = this->args("fence-turn", "o-fkill");
  args.back() = ledger.path;
  args.push_back("commit");
  EntityWorker next(args);
  const std::vector<std::string> lines = next.lines(std::chrono::seconds{60});
  EXPECT_TRUE(next.exited_cleanly());
  ASSERT_EQ(lines.size(), 2u) << ::testing::PrintToString(lines);
  ASSERT_EQ(lines[0].rfind("fence ", 0), 0u) << lines[0];
  EXPECT_GT(std::stoull(lines[0].substr(6)), dead);
  EXPECT_EQ(lines[1], "done");
  EXPECT_TRUE(strictly_growing(ledger_entries(ledger.path)));
}

REGISTER_TYPED_TEST_SUITE_P(EntityProcessTest, FourProcessesPayingOneOrderRunTheHandlerOnce,
                            AHolderKilledInsideItsHandlerLeavesNoTrace,
                            ProcessesTakingTurnsWhoseHandlersThrowSeeGrowingFences,
                            ProcessesRacingOnOneOperationNeverShareAFence,
                            AHolderKilledMidHandlerIsFollowedByALargerFence);

/// Table and column names that are not identifiers, each refused when the store is built. (An
/// empty version or state column stands for the default, "version" or "state".)
template <class Backend>
void expect_injection_refused(const typename Backend::Options& connection) {
  const std::vector<std::string> bad = {"orders; DROP TABLE orders",
                                        "orders--",
                                        "a b",
                                        "1orders",
                                        "",
                                        "\"orders\"",
                                        "orders'",
                                        "x.y",
                                        std::string("ord\0ers", 7),
                                        std::string(64, 'a')};
  for (const std::string& name : bad) {
    EXPECT_THROW((VersionStore<Backend>{VersionStoreOptions<Backend>{
                     .backend = connection, .table = EntityTable{name, "id", "version"}}}),
                 std::invalid_argument)
        << name;
    EXPECT_THROW((VersionStore<Backend>{VersionStoreOptions<Backend>{
                     .backend = connection, .table = EntityTable{"accounts", name, "version"}}}),
                 std::invalid_argument)
        << name;
    if (name.empty()) continue;  // an empty version/state column means the default name
    EXPECT_THROW((StateMachineStore<TransitionTable, Backend>{
                     order_machine(),
                     StateMachineStoreOptions<Backend>{
                         .backend = connection, .table = EntityTable{"orders", "id", name}}}),
                 std::invalid_argument)
        << name;
  }
  typename Backend::Options bad_prefix = connection;
  if constexpr (requires { bad_prefix.connection; }) {
    bad_prefix.connection.table_prefix = "x; DROP TABLE y; --";
  } else {
    bad_prefix.table_prefix = "x; DROP TABLE y; --";
  }
  EXPECT_THROW((VersionStore<Backend>{VersionStoreOptions<Backend>{
                   .backend = bad_prefix, .table = EntityTable{"accounts", "id", "version"}}}),
               std::invalid_argument);
  // The longest legal name and an underscore start are fine.
  EXPECT_NO_THROW((VersionStore<Backend>{VersionStoreOptions<Backend>{
      .backend = connection, .table = EntityTable{std::string(63, 'a'), "_id", "v2"}}}));
}

}  // namespace idem::testing
