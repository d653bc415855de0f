#pragma once
// A worker process: runs its slot's share of the operations through IdempotencyGuard, writing
// each handler run and each outcome to the ledger.

#include <cstdint>
#include <string>

#include "options.hpp"

namespace idem::soak {

/// The key of operation `op`: drawn from `keys` with the run's seed, so duplicates are random
/// but the same in every process.
std::string key_of_operation(const SoakOptions& o, std::int64_t op);
/// The key of index i (0 <= i < keys).
std::string key_name(int i);

/// Runs operations until the slot's share is done or the deadline passes. Returns the process
/// exit status: 0 done, 3 the ledger failed (a harness error, not a violation).
int run_worker(const SoakOptions& o);

}  // namespace idem::soak
