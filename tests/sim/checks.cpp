#include "sim/checks.hpp"

#include <array>

namespace idem::sim {

namespace {

struct CheckText {
  std::string_view name;
  std::string_view promise;
};

constexpr std::array<CheckText, kChecks> kText{{
    {"one_commit", "at most one committed result per key and epoch (design.md §3, §4)"},
    {"replay_is_committed", "every replay is the key's committed result (§2, §5)"},
    {"takeover_same_payload", "another payload never takes a live record: payload_mismatch (§4)"},
    {"fence_grows", "each claim's fence is above every fence the key had (§4, §9)"},
    {"taken_over_never_commits",
     "a superseded holder changes nothing and is never told its value was recorded (§4)"},
    {"lost_reply_is_recorded",
     "a retried commit that finds its own completion is recorded; lease_lost means a takeover; "
     "store_unavailable means no try landed (§8)"},
    {"tx_effects_once",
     "transactional mode: the handler's writes commit once per key, with its record (§9)"},
    {"failure_carries_no_effects",
     "a remembered failure, a throwing atomic step: none of the failed work's writes (§7)"},
    {"no_forgotten_replay",
     "nothing of a forgotten, purged or expired record comes back: no replay, no steps (§12)"},
    {"calls_return", "every call returns within its bound; nothing deadlocks (§6)"},
    {"steps_once",
     "a saved step never runs again in its run chain; load returns the saved "
     "steps (steps.md)"},
    {"observer_matches", "the observer hears what happened: one final event, takeovers (§5)"},
    {"retry_advice", "an error that says a retry cannot help is true of the key (§11)"},
    {"ledger_fencing",
     "fenced downstream writes: one per fence; once complete, the newest is the committed "
     "run's (§10)"},
    {"store_answers", "every store answer is one the record's rules allow (§3)"},
}};

}  // namespace

std::string_view name(Check check) noexcept {
  const auto i = static_cast<std::size_t>(check);
  return i < kChecks ? kText[i].name : "none";
}

std::string_view promise(Check check) noexcept {
  const auto i = static_cast<std::size_t>(check);
  return i < kChecks ? kText[i].promise : "";
}

Check check_named(std::string_view text) noexcept {
  for (std::size_t i = 0; i < kChecks; ++i) {
    if (kText[i].name == text) return static_cast<Check>(i);
  }
  return Check::count_;
}

}  // namespace idem::sim
