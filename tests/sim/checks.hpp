#pragma once
// The promises the simulator checks, one per promise of docs/design.md (the properties of
// model/properties.pml, and those the model cannot express), and where a run records a broken
// one.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace idem::sim {

enum class Check : std::uint8_t {
  one_commit,                  // at most one committed result per key and epoch (§3, §4)
  replay_is_committed,         // every replay is the committed result (§2, §5)
  takeover_same_payload,       // another payload never takes a live record (§4)
  fence_grows,                 // every claim's fence is above every earlier fence (§4, §9)
  taken_over_never_commits,    // a superseded holder changes nothing, is never told recorded (§4)
  lost_reply_is_recorded,      // a retried commit that finds itself is recorded (§8)
  tx_effects_once,             // transactional writes commit once, with the record (§9)
  failure_carries_no_effects,  // a remembered failure, a throwing atomic step: no writes (§7)
  no_forgotten_replay,         // nothing of a forgotten or expired record comes back (§12)
  calls_return,                // every call returns within its bound; no deadlock (§6)
  steps_once,                  // a saved step never runs again in its run chain (steps.md)
  observer_matches,            // what the observer hears is what happened (§5, observers)
  retry_advice,                // an error's "retry helps" is true of the key (§11)
  ledger_fencing,              // downstream fencing: one write per fence, newest committed (§10)
  store_answers,               // every store answer is one the record allows (§3)
  count_
};

inline constexpr std::size_t kChecks = static_cast<std::size_t>(Check::count_);

std::string_view name(Check check) noexcept;
/// The promise, in one line, with its section of docs/design.md.
std::string_view promise(Check check) noexcept;
/// The check named `text`, or count_.
Check check_named(std::string_view text) noexcept;

struct Violation {
  Check check = Check::count_;
  std::string what;
};

/// The violations of one run; the first one stops it.
class Violations {
 public:
  void add(Check check, std::string what) {
    if (list_.empty()) list_.push_back(Violation{check, std::move(what)});
  }
  bool any() const noexcept { return !list_.empty(); }
  const Violation& first() const { return list_.front(); }

 private:
  std::vector<Violation> list_;
};

}  // namespace idem::sim
