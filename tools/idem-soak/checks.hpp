#pragma once
// After the run: a final pass over every key through the store, the checks of the ledger
// against it, and the summary.

#include "chaos_log.hpp"
#include "options.hpp"

namespace idem::soak {

/// Checks the finished run and prints the summary and every violation to stdout. Returns the
/// exit status: 0 no violation, 1 violations, 2 the harness failed.
int check_and_report(const SoakOptions& o, const ChaosLog& log, double seconds);

}  // namespace idem::soak
