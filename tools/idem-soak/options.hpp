#pragma once
// idem-soak's command line: what to run against, how hard, and for how long.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace idem::soak {

enum class Backend { sqlite, postgres, redis };
/// steps: lease mode with a multi-step handler (an atomic phase and a recorded outside step,
/// docs/steps.md); SQLite and PostgreSQL.
enum class Mode { lease, transactional, steps };

struct SoakOptions {
  /// The store under test; memory is not offered (it cannot outlive a killed process).
  Backend backend = Backend::sqlite;
  /// lease (every backend) or transactional (SQLite and PostgreSQL).
  Mode mode = Mode::lease;
  /// The store's location: a PostgreSQL or Redis URI; for SQLite, defaults to <dir>/store.db.
  std::string target{};
  /// Folder for the ledger, the shared phase table and (SQLite) the store file. Created.
  std::string dir{};
  /// Worker processes at once.
  int workers = 4;
  /// Operations in all (split evenly between the worker slots).
  long ops = 4000;
  /// Distinct keys the operations pick from (fewer keys, more duplicates).
  int keys = 300;
  /// The run stops issuing operations after this long, even if some are left.
  std::chrono::seconds duration{60};
  /// The guard's lease; some handlers overrun it on purpose (lease mode) to force takeovers.
  std::chrono::milliseconds lease{400};
  /// Mean pause between two SIGKILLs of a worker; 0: no kills.
  std::chrono::milliseconds kill_every{400};
  /// Mean pause between two server restarts; 0 or no restart_cmd: no restarts.
  std::chrono::milliseconds restart_every{6000};
  /// Shell command that restarts the server and returns once it answers again; the soak
  /// expects completed records to survive it.
  std::string restart_cmd{};
  /// Seed of every random choice (keys, handler times, chaos).
  std::uint64_t seed = 1;
  /// Lease mode on SQLite or PostgreSQL: the store behind a GroupCommitStore.
  bool group_commit = false;
  /// Debug: every worker runs its first handler twice under one claim, so the checks must fail.
  bool inject_double_execution = false;

  // Set only in worker processes (the coordinator passes them).
  std::optional<int> worker_slot{};
  std::string run_id{};

  /// Table prefix (SQL) or key prefix (Redis) of this run's records.
  std::string store_prefix() const;
  std::string ledger_path() const { return dir + "/ledger.db"; }
  std::string shared_path() const { return dir + "/phases"; }
};

/// Parses argv; on a usage error prints the reason and the usage to stderr and returns nothing.
std::optional<SoakOptions> parse_options(int argc, char** argv);
/// The arguments that re-create `o` in a worker process for `slot`.
std::vector<std::string> worker_arguments(const SoakOptions& o, int slot);

const char* to_string(Backend b);
const char* to_string(Mode m);

}  // namespace idem::soak
