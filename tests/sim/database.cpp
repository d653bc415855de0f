#include "sim/database.hpp"

#include "idem/engine/failure_record.hpp"

namespace idem::sim {

void Database::commit(std::vector<Write>& writes) {
  for (const Write& w : writes) {
    ++rows_;
    if (w.failed) {
      violations_->add(
          Check::failure_carries_no_effects,
          "key " + printable(w.key) + ": run " + std::to_string(w.run) + "'s " +
              (w.step < 0 ? std::string("handler") : "atomic step " + std::to_string(w.step)) +
              " threw, and its write committed");
      return;
    }
    const KeyRecord* record = contract_->find(w.key);
    const std::uint64_t epoch = record != nullptr ? record->epoch : 0;
    const std::uint64_t chain = record != nullptr ? record->chain : 0;
    if (w.step >= 0) {
      const auto [it, fresh] = step_writes_.try_emplace({w.key, chain, w.step}, w.fence);
      if (!fresh) {
        violations_->add(Check::steps_once,
                         "key " + printable(w.key) + ": atomic step " + std::to_string(w.step) +
                             " committed twice in one run chain (fences " +
                             std::to_string(it->second) + " and " + std::to_string(w.fence) + ")");
        return;
      }
      continue;
    }
    const auto [it, fresh] = handler_writes_.try_emplace({w.key, epoch}, w.fence);
    if (!fresh && it->second != w.fence) {
      violations_->add(Check::tx_effects_once, "key " + printable(w.key) +
                                                   ": the handler's writes committed twice in "
                                                   "one epoch (fences " +
                                                   std::to_string(it->second) + " and " +
                                                   std::to_string(w.fence) + ")");
      return;
    }
  }
  writes.clear();
}

void Database::check_final(bool transactional) {
  if (!transactional) return;
  for (const auto& [key, record] : contract_->keys()) {
    const auto it = handler_writes_.find(std::pair<std::string, std::uint64_t>{key, record.epoch});
    if (record.state == KeyRecord::State::completed) {
      if (it == handler_writes_.end() || it->second != record.fence) {
        violations_->add(Check::tx_effects_once,
                         "key " + printable(key) + ": completed under fence " +
                             std::to_string(record.fence) + " without that run's writes beside it");
        return;
      }
    } else if (record.state == KeyRecord::State::failed && it != handler_writes_.end() &&
               detail::decode_failure(record.result).code != errc::result_too_large) {
      // (A result too large to store is remembered with the handler's writes: it succeeded.)
      violations_->add(Check::failure_carries_no_effects,
                       "key " + printable(key) + ": a remembered failure under fence " +
                           std::to_string(record.fence) + " with handler writes (fence " +
                           std::to_string(it->second) + ") committed in its epoch");
      return;
    }
  }
}

}  // namespace idem::sim
