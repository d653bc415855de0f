#include "checks.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "backend.hpp"
#include "ledger.hpp"
#include "worker.hpp"

namespace idem::soak {
namespace {

using namespace std::chrono_literals;

// A stored result names the handler run that produced it: "<key>|<fence>|<call>".
struct ResultId {
  std::string key;
  std::int64_t fence = 0;
  std::string call;
};
std::optional<ResultId> parse_result(const std::string& r) {
  const auto a = r.find('|');
  const auto b = a == std::string::npos ? a : r.find('|', a + 1);
  if (b == std::string::npos) return std::nullopt;
  try {
    return ResultId{r.substr(0, a), std::stoll(r.substr(a + 1, b - a - 1)), r.substr(b + 1)};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

struct NotCompleted {};  // thrown by the final pass's handler: the key had no completed record

using FinalState = std::map<std::string, std::optional<std::string>>;  // key -> completed result

class Checker {
 public:
  Checker(const SoakOptions& o, const ChaosLog& log) : o_(o), log_(log) {
    for (const auto& v : log.violations) violate("process", v);
    for (const Kill& k : log.kills) kill_time_[k.pid] = k.at_ns;
  }

  int run(double seconds) {
    // Every worker is gone; once one lease has passed no record is held by a live lease.
    std::this_thread::sleep_for(o_.lease + 100ms);
    Ledger ledger(o_.ledger_path());
    executions_ = ledger.executions();
    outcomes_ = ledger.outcomes();
    final_pass();
    check_outcomes();
    check_results_kept();
    check_results_have_a_run();
    check_one_run_per_claim();
    if (o_.mode != Mode::transactional) {
      check_one_holder_per_fence();
      check_no_two_live_holders();
    }
    if (o_.mode != Mode::lease) check_effects_exactly_once();
    if (o_.mode == Mode::steps) check_no_recorded_step_again(ledger.steps());
    report(seconds);
    if (!log_.harness_errors.empty()) return 2;
    return violations_.empty() ? 0 : 1;
  }

 private:
  void violate(const std::string& check, const std::string& what) {
    violations_.push_back(check + ": " + what);
  }

  // Asks the store about every key, after the run: a completed record replays; anything else
  // runs a handler that throws, so the guard releases (or rolls back) the key and nothing is
  // recorded.
  void final_pass() {
    with_store(o_, [&](auto& store) {
      IdempotencyGuard guard{store, Options{.scope = "soak",
                                            .lease = o_.lease,
                                            .ttl = std::chrono::hours{1},
                                            .in_progress = Wait{.timeout = 3 * o_.lease}}};
      for (int i = 0; i < o_.keys; ++i) {
        const std::string key = key_name(i);
        for (int attempt = 0;; ++attempt) {
          try {
            auto out = guard.execute(Key{key}, key, []() -> std::string { throw NotCompleted{}; });
            if (out.has_value()) {
              final_[key] = std::move(out).value();
            } else if (out.error() == errc::store_unavailable && attempt < 20) {
              std::this_thread::sleep_for(500ms);  // a server still coming back
              continue;
            } else {
              violate("final pass", "key " + key + " answered " + out.message());
            }
          } catch (const NotCompleted&) {
            final_[key] = std::nullopt;
          }
          break;
        }
      }
      return 0;
    });
  }

  // Every outcome is a value (executed or replayed) or an error the soak's conditions explain:
  // in_progress (a duplicate held elsewhere), store_unavailable (server restarting), in steps
  // mode a handler's lease_lost (taken over, told by a step), and, as the
  // commit error of an executed value, lease_lost (taken over), store_unavailable, or
  // outcome_unknown (the commit went out and its answer was lost).
  void check_outcomes() {
    static const std::set<std::string> errors_ok = {"in_progress", "store_unavailable"};
    static const std::set<std::string> commit_errors_ok = {"", "lease_lost", "store_unavailable",
                                                           "outcome_unknown"};
    for (const OutcomeRow& r : outcomes_) {
      // Steps mode: a holder taken over learns it from its next step's save (lease_lost).
      const bool step_lost =
          o_.mode == Mode::steps && r.kind == "handler_error" && r.code == "lease_lost";
      const bool ok = r.kind == "replayed" || step_lost ||
                      (r.kind == "executed" && commit_errors_ok.count(r.code)) ||
                      ((r.kind == "error" || r.kind == "handler_error") && errors_ok.count(r.code));
      if (!ok) {
        violate("documented outcome", "key " + r.key + " (worker " + std::to_string(r.pid) +
                                          "): " + r.kind + " " + r.code);
      }
    }
  }

  // No completed result lost or changed: whatever a worker saw completed (a recorded value or a
  // replay) replays the same bytes in the final pass.
  void check_results_kept() {
    for (const OutcomeRow& r : outcomes_) {
      const bool completed = r.kind == "replayed" || (r.kind == "executed" && r.code.empty());
      if (!completed) continue;
      const auto& now = final_[r.key];
      if (!now) {
        violate("result kept", "key " + r.key + " was completed (" + r.result +
                                   ") but has no completed record at the end: lost");
      } else if (*now != r.result) {
        violate("result kept", "key " + r.key + " was completed as " + r.result + " but replays " +
                                   *now + " at the end: changed");
      }
    }
  }

  // Every completed record's result was produced by a handler run in the ledger, under the
  // fence the result names, and that run finished without throwing.
  void check_results_have_a_run() {
    for (const auto& [key, result] : final_) {
      if (!result) continue;
      const auto id = parse_result(*result);
      const bool found = id && std::any_of(executions_.begin(), executions_.end(), [&](auto& e) {
                           return e.call == id->call && e.key == key && e.fence == id->fence &&
                                  e.t_end && !e.threw && e.result == *result;
                         });
      if (!found) {
        violate("result provenance",
                "key " + key + " replays " + *result + ", which no ledger run produced");
      }
    }
  }

  // A handler runs at most once per claim: one guard.execute call, one run.
  void check_one_run_per_claim() {
    std::map<std::pair<std::string, std::string>, std::vector<const Execution*>> runs;
    for (const Execution& e : executions_) runs[{e.key, e.call}].push_back(&e);
    for (const auto& [id, list] : runs) {
      if (list.size() < 2) continue;
      violate("at most once per claim", "key " + id.first + " fence " +
                                            std::to_string(list[0]->fence) + " (worker " +
                                            std::to_string(list[0]->pid) + "): handler executed " +
                                            std::to_string(list.size()) + " times under one claim");
    }
  }

  // Lease mode: fences grow by one per claim of a key, so a fence names one holder.
  void check_one_holder_per_fence() {
    std::map<std::pair<std::string, std::int64_t>, std::set<std::string>> calls;
    for (const Execution& e : executions_) calls[{e.key, e.fence}].insert(e.call);
    for (const auto& [id, set] : calls) {
      if (set.size() < 2) continue;
      violate("at most once per fence", "key " + id.first + " fence " + std::to_string(id.second) +
                                            " was given to " + std::to_string(set.size()) +
                                            " holders");
    }
  }

  std::int64_t end_of(const Execution& e) const {
    if (e.t_end) return *e.t_end;
    const auto k = kill_time_.find(e.pid);
    return k == kill_time_.end() ? INT64_MAX : k->second;
  }

  // Lease mode: the holder of fence f+1 started its handler while the holder of a lower fence
  // was still running and before that holder's lease could have passed. The lower holder's
  // lease began after its t_call (its claim was sent then), so it lasted at least until
  // t_call + lease; the tolerance covers the database clock's millisecond steps.
  void check_no_two_live_holders() {
    constexpr std::int64_t tolerance_ns = 20'000'000;
    const std::int64_t lease_ns = std::chrono::nanoseconds(o_.lease).count();
    std::map<std::string, std::vector<const Execution*>> by_key;
    for (const Execution& e : executions_) by_key[e.key].push_back(&e);
    for (auto& [key, list] : by_key) {
      std::sort(list.begin(), list.end(), [](auto* a, auto* b) { return a->fence < b->fence; });
      for (std::size_t i = 0; i < list.size(); ++i) {
        for (std::size_t j = i + 1; j < list.size(); ++j) {
          const Execution& a = *list[i];
          const Execution& b = *list[j];
          if (a.fence == b.fence) continue;  // reported by the per-fence check
          const std::int64_t live_until = std::min(end_of(a), a.t_call + lease_ns - tolerance_ns);
          if (b.t_start < live_until) {
            violate("one live holder",
                    "key " + key + ": fence " + std::to_string(b.fence) + " started " +
                        std::to_string((b.t_start - a.t_call) / 1'000'000) + " ms after fence " +
                        std::to_string(a.fence) +
                        " was claimed, while it still ran under a live lease of " +
                        std::to_string(o_.lease.count()) + " ms");
          }
        }
      }
    }
  }

  // Steps mode: once a holder of a key passed its "outside" step (the step's record stood:
  // saved under its fence, which no later claim could precede, or found), no later holder (a
  // larger fence) starts the step's work again. A holder killed inside the step, or between
  // its work and its record, leaves it to the next; a stale holder may still be inside it.
  void check_no_recorded_step_again(const std::vector<Ledger::StepRow>& rows) {
    std::map<std::pair<std::string, std::string>, std::int64_t> fence_of;  // (key, call)
    for (const Execution& e : executions_) fence_of[{e.key, e.call}] = e.fence;
    auto fence = [&](const Ledger::StepRow& r) {
      const auto it = fence_of.find({r.key, r.call});
      return it == fence_of.end() ? std::int64_t{-1} : it->second;
    };
    std::map<std::string, std::int64_t> first_passed;  // key -> smallest fence that passed
    for (const auto& r : rows) {
      if (r.kind != "passed") continue;
      auto [it, fresh] = first_passed.emplace(r.key, fence(r));
      if (!fresh) it->second = std::min(it->second, fence(r));
    }
    for (const auto& r : rows) {
      if (r.kind != "ran") continue;
      const auto it = first_passed.find(r.key);
      if (it != first_passed.end() && fence(r) > it->second) {
        violate("no recorded step again", "key " + r.key + ": the holder of fence " +
                                              std::to_string(fence(r)) +
                                              " ran the step 'outside' that the holder of fence " +
                                              std::to_string(it->second) + " had recorded");
      }
    }
  }

  // Transactional mode: the effects table, written in the claim's transaction, holds exactly
  // one row per completed key, from the run whose result the record holds, and none for a key
  // without a completed record (every rolled-back run left nothing).
  void check_effects_exactly_once() {
    std::map<std::string, std::vector<Effect>> effects;
    try {
      for (Effect& e : Effects::read_all(o_)) effects[e.key].push_back(std::move(e));
    } catch (const std::exception& e) {
      violate("exactly once", std::string("cannot read the effects table: ") + e.what());
      return;
    }
    for (const auto& [key, result] : final_) {
      const auto it = effects.find(key);
      const std::size_t n = it == effects.end() ? 0 : it->second.size();
      if (!result) {
        // Steps mode: a run may have committed its atomic phase and died; once at most.
        if (n > (o_.mode == Mode::steps ? 1u : 0u)) {
          violate("exactly once", "key " + key + " has no completed record but " +
                                      std::to_string(n) + " committed effects");
        }
        continue;
      }
      if (n != 1) {
        violate("exactly once", "key " + key + " completed, executed " + std::to_string(n) +
                                    " times (committed effects)");
        continue;
      }
      if (o_.mode == Mode::steps) continue;  // the phase's run need not be the committing one
      const auto id = parse_result(*result);
      if (!id || it->second[0].call != id->call) {
        violate("exactly once", "key " + key + ": the committed effect came from call " +
                                    it->second[0].call + ", the record from " + *result);
      }
    }
  }

  void report(double seconds) const {
    std::map<std::string, long> errors, unrecorded, kills_at;
    long executed = 0, replayed = 0, recorded = 0;
    for (const OutcomeRow& r : outcomes_) {
      if (r.kind == "replayed") {
        ++replayed;
      } else if (r.kind == "executed") {
        ++executed;
        if (r.code.empty())
          ++recorded;
        else
          ++unrecorded[r.code];
      } else {
        ++errors[(r.kind == "error" ? "" : r.kind + " ") + r.code];
      }
    }
    long finished = 0, cut = 0, threw = 0;
    for (const Execution& e : executions_) {
      if (!e.t_end)
        ++cut;
      else if (e.threw)
        ++threw;
      else
        ++finished;
    }
    long completed_keys = 0, rolled_back = 0;
    std::set<std::string> committed_calls;
    for (const auto& [key, result] : final_) {
      if (!result) continue;
      ++completed_keys;
      if (auto id = parse_result(*result)) committed_calls.insert(id->call);
    }
    for (const Execution& e : executions_) rolled_back += committed_calls.count(e.call) == 0;
    long in_call_kills = 0;
    for (const Kill& k : log_.kills) {
      ++kills_at[to_string(k.phase)];
      in_call_kills += k.phase != Phase::idle && k.phase != Phase::after_call;
    }
    double restart_total = 0, restart_max = 0;
    for (const Restart& r : log_.restarts) {
      restart_total += static_cast<double>(r.took_ns) / 1e9;
      restart_max = std::max(restart_max, static_cast<double>(r.took_ns) / 1e9);
    }
    auto list = [](const std::map<std::string, long>& m) {
      std::string s;
      for (const auto& [k, v] : m) s += (s.empty() ? "" : ", ") + k + " " + std::to_string(v);
      return s.empty() ? std::string("none") : s;
    };

    std::printf("idem-soak %s/%s: %d workers, %d keys, %.1f s, seed %llu\n", to_string(o_.backend),
                to_string(o_.mode), o_.workers, o_.keys, seconds,
                static_cast<unsigned long long>(o_.seed));
    std::printf("  operations   %zu finished + %ld cut by a kill (bound %ld)\n", outcomes_.size(),
                in_call_kills, o_.ops);
    std::printf("  executed     %ld (recorded %ld; unrecorded: %s)\n", executed, recorded,
                list(unrecorded).c_str());
    std::printf("  replayed     %ld\n", replayed);
    std::printf("  errors       %s\n", list(errors).c_str());
    std::printf(
        "  handler runs %ld finished, %ld threw, %ld cut by a kill; %ld not the "
        "committed one%s\n",
        finished, threw, cut, rolled_back,
        o_.mode == Mode::transactional ? " (rolled back)"
                                       : " (taken over, unrecorded, or resumed)");
    std::printf("  keys         %ld of %d completed\n", completed_keys, o_.keys);
    std::printf("  kills        %zu (%s); %d processes started\n", log_.kills.size(),
                list(kills_at).c_str(), log_.spawned);
    std::printf("  restarts     %zu (%.2f s mean, %.2f s max)\n", log_.restarts.size(),
                log_.restarts.empty() ? 0.0 : restart_total / log_.restarts.size(), restart_max);
    for (const auto& h : log_.harness_errors) std::printf("  HARNESS ERROR %s\n", h.c_str());
    std::printf("  violations   %zu\n", violations_.size());
    for (std::size_t i = 0; i < violations_.size() && i < 50; ++i) {
      std::printf("  VIOLATION %s\n", violations_[i].c_str());
    }
    if (violations_.size() > 50) std::printf("  ... and %zu more\n", violations_.size() - 50);
  }

  const SoakOptions& o_;
  const ChaosLog& log_;
  std::map<int, std::int64_t> kill_time_;
  std::vector<Execution> executions_;
  std::vector<OutcomeRow> outcomes_;
  FinalState final_;
  std::vector<std::string> violations_;
};

}  // namespace

int check_and_report(const SoakOptions& o, const ChaosLog& log, double seconds) {
  return Checker(o, log).run(seconds);
}

}  // namespace idem::soak
