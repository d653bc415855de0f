#pragma once
// A downstream system fenced as docs/design.md §10 asks: keyed by the idempotency key, it keeps
// the highest fence it has seen and accepts a write only under a fence at least that high. The
// checks: at most one accepted write per fence, and once the key completes, the newest accepted
// write is the committed run's.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "idem/store.hpp"
#include "sim/checks.hpp"
#include "sim/contract.hpp"

namespace idem::sim {

class Ledger {
 public:
  Ledger(const Contract& contract, Violations& violations)
      : contract_(&contract), violations_(&violations) {}

  /// Run `run` writes under `fence`; false when refused (a higher fence was seen).
  bool write(std::string_view key, Fence fence, std::uint64_t run, Time now);
  /// The key's commit under `fence` by `run` just landed.
  void committed(std::string_view key, Fence fence, Time now);
  /// The store lost every record and fences start again (a volatile restart).
  void reset() { keys_.clear(); }

 private:
  struct Entry {
    Fence high = 0;
    std::uint64_t run = 0;  // the run of the newest accepted write
    bool any = false;
  };
  const Contract* contract_;
  Violations* violations_;
  std::map<std::string, Entry, std::less<>> keys_;
};

}  // namespace idem::sim
