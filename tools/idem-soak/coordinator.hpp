#pragma once
// The coordinator: prepares the store and the ledger, keeps N worker processes running, and
// runs the chaos thread that SIGKILLs them and restarts the server.

#include "chaos_log.hpp"
#include "options.hpp"

namespace idem::soak {

/// Runs the workers to the end (their operations done or the deadline passed) under chaos.
/// Throws std::runtime_error when the run cannot be set up.
ChaosLog run_workers(SoakOptions& o);

}  // namespace idem::soak
