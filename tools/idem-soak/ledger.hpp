#pragma once
// The soak's ledger: a SQLite file (WAL) of its own, which no store under test can see or roll
// back. Every handler run is written there (and committed) before the handler returns, and
// every operation's outcome after guard.execute returns; the checks read it at the end.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace SQLite {
class Database;
}

namespace idem::soak {

/// One handler run. `call` names the guard.execute call it ran in (worker incarnation and call
/// number), so two runs under one claim share it.
struct Execution {
  std::string call;
  std::string key;
  std::int64_t fence = 0;
  int pid = 0;
  int slot = 0;
  std::int64_t t_call = 0;              // steady ns: before guard.execute (so before the claim)
  std::int64_t t_start = 0;             // steady ns: the handler began
  std::optional<std::int64_t> t_end{};  // steady ns: the handler finished (absent: killed)
  std::string result{};  // what the handler returned ("" while running or if it threw)
  bool threw = false;    // the handler threw (its transaction, if any, rolled back)
};

/// How one guard.execute call ended, as the worker saw it.
struct OutcomeRow {
  int slot = 0;
  std::int64_t op = 0;
  int pid = 0;
  std::string key;
  std::string kind;      // executed | replayed | error | handler_error | unexpected
  std::string code{};    // errc name of an error, or of the commit error of an executed value
  std::string result{};  // the value, for executed and replayed
};

class Ledger {
 public:
  /// Creates the file and its tables (WAL mode); throws SQLite::Exception on failure.
  static void create(const std::string& path);
  explicit Ledger(const std::string& path);
  ~Ledger();
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  /// Writes the start of a run and returns its row id. Committed when it returns.
  std::int64_t begin_execution(const Execution& e);
  /// Writes the end of run `id`. Committed when it returns.
  void end_execution(std::int64_t id, std::int64_t t_end, std::string_view result, bool threw);
  void record_outcome(const OutcomeRow& o);

  /// Steps mode: `kind` "ran" as a step's work starts, "passed" once ctx.step returned (its
  /// record stands: saved by this run, or found). Committed when it returns.
  void record_step(const std::string& key, const std::string& call, const char* kind,
                   std::int64_t t);
  struct StepRow {
    std::string key, call, kind;
    std::int64_t t = 0;
  };
  std::vector<StepRow> steps() const;

  std::vector<Execution> executions() const;
  std::vector<OutcomeRow> outcomes() const;

 private:
  std::unique_ptr<SQLite::Database> db_;
};

}  // namespace idem::soak
