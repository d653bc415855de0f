#include "sim/ledger.hpp"

namespace idem::sim {

bool Ledger::write(std::string_view key, Fence fence, std::uint64_t run, Time now) {
  Entry& e = keys_[std::string(key)];
  if (e.any && fence < e.high) return false;
  if (e.any && fence == e.high && e.run != run) {
    violations_->add(Check::ledger_fencing,
                     "key " + printable(key) + ": runs " + std::to_string(e.run) + " and " +
                         std::to_string(run) + " both wrote downstream under fence " +
                         std::to_string(fence));
    return false;
  }
  // Once the key completed, with its run's write here, nothing else may be accepted (a run
  // that never wrote downstream leaves nothing to protect).
  const KeyRecord* record = contract_->find(key);
  if (record != nullptr && record->state == KeyRecord::State::completed &&
      now < record->expires_at && record->fence != fence && e.any && e.high >= record->fence) {
    violations_->add(Check::ledger_fencing, "key " + printable(key) + ": a write under fence " +
                                                std::to_string(fence) +
                                                " accepted after the key completed under fence " +
                                                std::to_string(record->fence));
    return false;
  }
  e.any = true;
  e.high = fence;
  e.run = run;
  return true;
}

void Ledger::committed(std::string_view key, Fence fence, Time /*now*/) {
  const auto it = keys_.find(key);
  if (it == keys_.end() || !it->second.any) return;
  if (it->second.high > fence) {
    violations_->add(Check::ledger_fencing, "key " + printable(key) + ": completed under fence " +
                                                std::to_string(fence) +
                                                " while downstream already holds fence " +
                                                std::to_string(it->second.high) + "'s write");
  }
}

}  // namespace idem::sim
