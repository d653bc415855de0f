#pragma once
// What the coordinator saw while the soak ran: its kills, its server restarts, and the workers
// that died on their own.

#include <cstdint>
#include <string>
#include <vector>

#include "shared_state.hpp"

namespace idem::soak {

struct Kill {
  int pid = 0;
  int slot = 0;
  std::int64_t at_ns = 0;     // steady clock
  Phase phase = Phase::idle;  // where the worker was when the signal left
};

struct Restart {
  std::int64_t at_ns = 0;
  std::int64_t took_ns = 0;
  int status = 0;  // the restart command's exit status
};

struct ChaosLog {
  std::vector<Kill> kills;
  std::vector<Restart> restarts;
  std::vector<std::string> violations;      // workers that crashed or hung
  std::vector<std::string> harness_errors;  // the soak itself failed (ledger, restart command)
  int spawned = 0;
};

}  // namespace idem::soak
