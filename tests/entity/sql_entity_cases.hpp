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

#ifndef IDEM_ENTITY_WORKER
#error "IDEM_ENTITY_WORKER must name the idem_entity_worker binary"
#endif

namespace idem::testing {

/// An idem_entity_worker process with its stdout on a pipe; killed with the object.
class EntityWorker {
 public:
  explicit EntityWorker(std::vector<std::string> args) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], 1);
      ::close(fds[0]);
      ::close(fds[1]);
      static std::string exe = IDEM_ENTITY_WORKER;
      std::vector<char*> argv{exe.data()};
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(exe.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    fd_ = fds[0];
  }
  ~EntityWorker() {
    if (pid_ > 0) kill9();
    if (fd_ >= 0) ::close(fd_);
  }
  EntityWorker(const EntityWorker&) = delete;
  EntityWorker& operator=(const EntityWorker&) = delete;

  /// Lines until EOF or `timeout`; `stop_at`: return as soon as a line equals it.
  std::vector<std::string> lines(milliseconds timeout, const std::string& stop_at = {}) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::vector<std::string> out;
    for (;;) {
      for (std::size_t nl; (nl = buffer_.find('\n')) != std::string::npos;) {
        out.push_back(buffer_.substr(0, nl));
        buffer_.erase(0, nl + 1);
        if (!stop_at.empty() && out.back() == stop_at) return out;
      }
      const auto left =
          std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return out;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return out;
      char chunk[4096];
      const ssize_t n = ::read(fd_, chunk, sizeof chunk);
      if (n <= 0) return out;
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }
  /// Waits for the exit; true when it exited with status 0.
  bool exited_cleanly() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  void kill9() {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string buffer_;
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

REGISTER_TYPED_TEST_SUITE_P(EntityProcessTest, FourProcessesPayingOneOrderRunTheHandlerOnce,
                            AHolderKilledInsideItsHandlerLeavesNoTrace);

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
  bad_prefix.table_prefix = "x; DROP TABLE y; --";
  EXPECT_THROW((VersionStore<Backend>{VersionStoreOptions<Backend>{
                   .backend = bad_prefix, .table = EntityTable{"accounts", "id", "version"}}}),
               std::invalid_argument);
  // The longest legal name and an underscore start are fine.
  EXPECT_NO_THROW((VersionStore<Backend>{VersionStoreOptions<Backend>{
      .backend = connection, .table = EntityTable{std::string(63, 'a'), "_id", "v2"}}}));
}

}  // namespace idem::testing
