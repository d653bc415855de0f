// idem-soak: N worker processes run M idempotent operations over K keys against one store while
// a chaos thread SIGKILLs workers and restarts the server; then it checks, from a ledger the
// store cannot see, that nothing ran twice where it must not and no completed result was lost
// or changed. See docs/reliability.md.

#include <chrono>
#include <cstdio>
#include <exception>

#include "checks.hpp"
#include "coordinator.hpp"
#include "options.hpp"
#include "worker.hpp"

int main(int argc, char** argv) {
  auto parsed = idem::soak::parse_options(argc, argv);
  if (!parsed) return 2;
  idem::soak::SoakOptions& o = *parsed;
  if (o.worker_slot) return idem::soak::run_worker(o);
  try {
    const auto start = std::chrono::steady_clock::now();
    const idem::soak::ChaosLog log = idem::soak::run_workers(o);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    std::fflush(stderr);
    return idem::soak::check_and_report(o, log, took.count());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idem-soak: %s\n", e.what());
    return 2;
  }
}
