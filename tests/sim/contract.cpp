#include "sim/contract.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "idem/admin.hpp"
#include "idem/error.hpp"

namespace idem::sim {

using State = KeyRecord::State;
using std::chrono::milliseconds;

std::string_view to_string(State state) noexcept {
  switch (state) {
    case State::absent:
      return "absent";
    case State::released:
      return "released";
    case State::held:
      return "held";
    case State::completed:
      return "completed";
    case State::failed:
      return "failed";
  }
  return "?";
}

std::string printable(std::string_view key) {
  // An effective key reads as scope/principal/id.
  std::size_t pos = 0;
  std::size_t n = 0;
  if (admin::detail::read_varint(key, pos, n) && n <= key.size() - pos) {
    const std::string scope(key.substr(pos, n));
    std::string principal;
    std::string id;
    if (admin::detail::split_key(key, scope, principal, id) && !id.empty()) {
      key = {};
      return printable(scope) + "/" + printable(principal) + "/" + printable(id);
    }
  }
  std::string out;
  for (char c : key) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7f && c != '\\') {
      out.push_back(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", b);
      out.append(hex);
    }
  }
  return out;
}

std::string_view to_string(ClaimStatus s) noexcept {
  switch (s) {
    case ClaimStatus::acquired:
      return "acquired";
    case ClaimStatus::completed:
      return "completed";
    case ClaimStatus::failed:
      return "failed";
    case ClaimStatus::in_progress:
      return "in_progress";
    case ClaimStatus::mismatch:
      return "mismatch";
  }
  return "?";
}

std::string claim_text(const Claim& c) {
  switch (c.status) {
    case ClaimStatus::acquired:
      return std::string(c.took_over ? "took over" : "acquired") + " fence " +
             std::to_string(c.fence);
    case ClaimStatus::completed:
      return "completed " + printable(c.result);
    default:
      return std::string(to_string(c.status));
  }
}

namespace {

bool finished(State s) noexcept { return s == State::completed || s == State::failed; }

State state_of(ClaimStatus status) noexcept {
  return status == ClaimStatus::failed ? State::failed : State::completed;
}

std::string ms(Duration d) {
  return std::to_string(std::chrono::duration<double, std::milli>(d).count()) + " ms";
}

std::string status_text(const Status& s) { return s ? "ok" : s.failure().describe(); }

}  // namespace

// What a claim of the record must answer at one moment.
struct Contract::Expect {
  ClaimStatus status = ClaimStatus::acquired;
  bool took_over = false;
  bool by_one = false;     // acquired: the record's fence plus one (else above every fence)
  bool carry = false;      // acquired: the steps and kept request carry over
  bool new_epoch = false;  // acquired: a finished record went
  Duration lease_left{};   // in_progress (lease mode)
  bool operator==(const Expect&) const = default;
};

Contract::Expect Contract::expect_claim(const KeyRecord& r, const Fingerprint& fingerprint,
                                        Time at) const {
  const bool lease_mode = options_.mode == StoreMode::lease;
  const bool by_one = lease_mode && options_.fences_by_one;
  // An expired record: a store that deletes it starts the next one above every fence.
  const bool by_one_expired = by_one && !options_.expiry_removes;
  Expect e;
  switch (r.state) {
    case State::absent:
      return e;
    case State::released:
      e.by_one = at < r.keep_until ? by_one : by_one_expired;
      e.carry = at < r.keep_until && r.fingerprint == fingerprint;
      return e;
    case State::completed:
    case State::failed:
      if (at >= r.expires_at) {
        e.by_one = by_one_expired;
        e.new_epoch = true;
        return e;
      }
      e.status = r.fingerprint != fingerprint ? ClaimStatus::mismatch
                 : r.state == State::failed   ? ClaimStatus::failed
                                              : ClaimStatus::completed;
      return e;
    case State::held:
      if (!lease_mode) {
        // The row is locked by the holder's transaction: any claim waits on it, then gives up.
        e.status = ClaimStatus::in_progress;
        return e;
      }
      if (at >= r.keep_until) {
        e.by_one = by_one_expired;
        return e;
      }
      if (r.fingerprint != fingerprint) {
        e.status = ClaimStatus::mismatch;
        return e;
      }
      if (at < r.lease_until) {
        e.status = ClaimStatus::in_progress;
        e.lease_left = r.lease_until - at;
        return e;
      }
      e.took_over = true;
      e.by_one = by_one;
      e.carry = true;
      return e;
  }
  return e;
}

void Contract::fail(Check check, std::string_view key, std::string what) {
  violations_->add(check, "key " + printable(key) + ": " + what);
}

bool Contract::holds(const KeyRecord& r, Fence fence) const noexcept {
  return r.state == State::held && r.fence == fence;
}

bool Contract::went(KeyRecord& r, const Status& answer, Time now) {
  if (!options_.expiry_removes || answer || answer.error() != errc::lease_lost) return false;
  const Time until = finished(r.state) ? r.expires_at : r.keep_until;
  if (r.state == State::absent || now + options_.tolerance < until) return false;
  remove(r);  // its holder was fenced off by the expiry, not by a takeover
  return true;
}

bool Contract::allowed(const KeyRecord& r, const ClaimRequest& request, const Claim& c, Time now,
                       Check& broken, std::string& why, Expect& matched) const {
  // Near a boundary the store's clock may be on either side of it (real stores): every answer
  // the record gives somewhere within the tolerance is allowed.
  std::vector<Expect> options{expect_claim(r, request.fingerprint, now)};
  if (options_.tolerance > Duration::zero()) {
    const Time low = now - options_.tolerance - call_time_;
    const Time high = now + options_.tolerance;
    options.push_back(expect_claim(r, request.fingerprint, low));
    options.push_back(expect_claim(r, request.fingerprint, high));
    for (const Time edge : {r.lease_until, r.keep_until, r.expires_at}) {
      if (edge > low && edge <= high) {
        options.push_back(expect_claim(r, request.fingerprint, edge - Duration(1)));
        options.push_back(expect_claim(r, request.fingerprint, edge));
      }
    }
  }
  const std::string record =
      std::string(to_string(r.state)) + " record (fence " + std::to_string(r.fence) + ")";
  // Transactional mode: a store that knows the holder's payload (the holder is in its own
  // process) may answer another payload's claim mismatch rather than in_progress.
  if (options_.mode == StoreMode::transactional && r.state == State::held &&
      r.fingerprint != request.fingerprint && c.status == ClaimStatus::mismatch) {
    matched = Expect{.status = ClaimStatus::mismatch};
    return true;
  }
  for (const Expect& e : options) {
    if (e.status != c.status) continue;
    matched = e;
    switch (c.status) {
      case ClaimStatus::acquired:
        if (e.took_over != c.took_over) continue;
        if (e.by_one ? c.fence != r.fence + 1 : c.fence <= r.max_fence) {
          broken = Check::fence_grows;
          why = "acquired under fence " + std::to_string(c.fence) + " after a " + record +
                " whose largest fence was " + std::to_string(r.max_fence) +
                (e.by_one ? ": lease mode takes exactly the next one" : "");
          return false;
        }
        return true;
      case ClaimStatus::completed:
      case ClaimStatus::failed:
        if (c.result != r.result) {
          broken = Check::replay_is_committed;
          why = "a claim replayed bytes that are not the committed result";
          return false;
        }
        if (c.fence != r.fence) {
          broken = Check::store_answers;
          why = "a replay under fence " + std::to_string(c.fence) + " of a " + record;
          return false;
        }
        return true;
      case ClaimStatus::in_progress:
        if (options_.tolerance == Duration::zero() && options_.mode == StoreMode::lease &&
            c.lease_remaining != std::chrono::ceil<milliseconds>(e.lease_left)) {
          broken = Check::store_answers;
          why = "in_progress with " + std::to_string(c.lease_remaining.count()) +
                " ms left; the lease has " + ms(e.lease_left);
          return false;
        }
        return true;
      case ClaimStatus::mismatch:
        return true;
    }
  }
  const Expect& e = options[0];
  why = "a claim (" + std::string(c.took_over ? "took_over, " : "") + "answer " +
        std::string(to_string(c.status)) + ", fence " + std::to_string(c.fence) + ") of a " +
        record + " that the contract answers " + std::string(to_string(e.status)) +
        (e.took_over ? " (a takeover)" : "") + "; lease " + ms(r.lease_until - now) +
        " left, kept " + ms(r.keep_until - now) + ", expires in " + ms(r.expires_at - now) +
        ", same payload: " + (r.fingerprint == request.fingerprint ? "yes" : "no");
  if (e.status == ClaimStatus::mismatch && c.status == ClaimStatus::acquired) {
    broken = Check::takeover_same_payload;
  } else if (c.status == ClaimStatus::completed || c.status == ClaimStatus::failed) {
    broken = Check::no_forgotten_replay;
  } else if (e.status == ClaimStatus::acquired && c.status == ClaimStatus::acquired) {
    broken = Check::observer_matches;  // the takeover flag is what reports a takeover
  } else {
    broken = Check::store_answers;
  }
  return false;
}

void Contract::acquire(KeyRecord& r, const ClaimRequest& request, const Claim& c, Time now,
                       const Expect& e) {
  if (e.new_epoch) ++r.epoch;
  if (!e.carry) {
    ++r.chain;
    r.steps.clear();
    r.request.reset();
    r.request_in_doubt = false;
  }
  r.state = State::held;
  r.fingerprint = request.fingerprint;
  r.fence = c.fence;
  r.max_fence = std::max(r.max_fence, c.fence);
  r.claimed_at = now;
  r.lease_until = now + request.lease;
  r.keep_until = std::max(now + request.retention, now + options_.held_leases * request.lease);
  r.result.clear();
  r.took_over = c.took_over;
}

void Contract::claim(const ClaimRequest& request, const Result<Claim>& answer, Time now) {
  if (!answer) return;  // a store's own failure (full) changes nothing
  const std::string key(request.key);
  KeyRecord& r = keys_[key];
  const Claim& c = answer.value();
  Check broken = Check::store_answers;
  std::string why;
  Expect matched;
  if (!allowed(r, request, c, now, broken, why, matched)) {
    fail(broken, key, why);
    return;
  }
  if (c.status != ClaimStatus::acquired) return;
  if (options_.mode == StoreMode::transactional) before_[{key, c.fence}] = r;
  acquire(r, request, c, now, matched);
  if (options_.mode == StoreMode::transactional) savepoints_[{key, c.fence}] = r.steps;
}

void Contract::claim_in_doubt(const ClaimRequest& request, Fence fence, Time now) {
  const std::string key(request.key);
  KeyRecord& r = keys_[key];
  for (const bool took_over : {false, true}) {
    const Claim c{.status = ClaimStatus::acquired, .fence = fence, .took_over = took_over};
    Check broken = Check::store_answers;
    std::string why;
    Expect matched;
    if (allowed(r, request, c, now, broken, why, matched)) {
      acquire(r, request, c, now, matched);
      return;
    }
  }
  fail(Check::store_answers, key,
       "a claim whose answer was lost left the record under fence " + std::to_string(fence) +
           ", which no claim the contract allows could have");
}

void Contract::commit(const Ticket& ticket, const Completion& completion, const Status& answer,
                      Time now) {
  const std::string key(ticket.key);
  KeyRecord& r = keys_[key];
  const bool landed_before = r.fence == ticket.fence && r.state == state_of(completion.status) &&
                             r.result == completion.result;
  if (holds(r, ticket.fence)) {
    if (went(r, answer, now)) return;
    if (!answer) {
      fail(Check::store_answers, key,
           "the holder's commit under fence " + std::to_string(ticket.fence) +
               " was refused: " + status_text(answer));
      return;
    }
    for (const KeyRecord::Landed& l : r.landed) {
      if (l.epoch == r.epoch) {
        fail(Check::one_commit, key,
             "a second commit in one epoch (fences " + std::to_string(l.fence) + " and " +
                 std::to_string(ticket.fence) + ")");
        return;
      }
    }
    r.state = state_of(completion.status);
    r.result = std::string(completion.result);
    r.expires_at = now + completion.ttl;
    ++r.chain;
    r.steps.clear();
    r.request.reset();
    r.landed.push_back({ticket.fence, completion.status, r.result, r.epoch});
    if (on_landed) on_landed(key, ticket.fence, completion.status, now);
    before_.erase({key, ticket.fence});
    savepoints_.erase({key, ticket.fence});
    return;
  }
  if (landed_before) {
    if (went(r, answer, now)) return;
    if (!answer) {
      fail(Check::lost_reply_is_recorded, key,
           "a commit repeated under fence " + std::to_string(ticket.fence) +
               " that finds its own completion answered " + status_text(answer));
    }
    return;
  }
  if (answer) {
    const bool superseded = r.fence != ticket.fence;
    fail(superseded ? Check::taken_over_never_commits : Check::one_commit, key,
         "a commit under fence " + std::to_string(ticket.fence) + " succeeded on a " +
             std::string(to_string(r.state)) + " record under fence " + std::to_string(r.fence));
    return;
  }
  // Transactional mode: a holder whose connection dropped hears that failure again (§8).
  if (answer.error() != errc::lease_lost && options_.mode == StoreMode::lease) {
    fail(Check::store_answers, key,
         "a stale commit answered " + status_text(answer) + " instead of lease_lost");
  }
}

bool Contract::fenced(KeyRecord& r, std::string_view key, Fence fence, const Status& answer,
                      Time now, std::string_view what) {
  if (!holds(r, fence)) {
    if (answer) {
      fail(Check::taken_over_never_commits, key,
           std::string(what) + " under fence " + std::to_string(fence) + " succeeded on a " +
               std::string(to_string(r.state)) + " record under fence " + std::to_string(r.fence));
    }
    return false;
  }
  if (went(r, answer, now)) return false;
  // A real store's call that failed on its way (a timeout, a dropped connection) says nothing.
  if (answer.error() == errc::store_unavailable || answer.error() == errc::outcome_unknown) {
    return false;
  }
  if (!answer) {
    fail(Check::store_answers, key,
         "the holder's " + std::string(what) + " was refused: " + status_text(answer));
    return false;
  }
  return true;
}

void Contract::abort(const Ticket& ticket, const Status& answer, Time now) {
  const std::string key(ticket.key);
  KeyRecord& r = keys_[key];
  if (!fenced(r, key, ticket.fence, answer, now, "abort")) return;
  if (options_.mode == StoreMode::transactional) {
    rolled_back(key, ticket.fence);
  } else {
    r.state = State::released;
  }
}

void Contract::extend(const Ticket& ticket, milliseconds lease, const Status& answer, Time now) {
  KeyRecord& r = keys_[std::string(ticket.key)];
  if (!fenced(r, ticket.key, ticket.fence, answer, now, "extend")) return;
  r.lease_until = now + lease;
  r.keep_until = std::max(r.keep_until, now + options_.held_leases * lease);
}

void Contract::load_steps(const Ticket& ticket, const Result<std::vector<StepRecord>>& answer,
                          Time now) {
  KeyRecord& r = keys_[std::string(ticket.key)];
  const Status loaded = answer ? Status{} : Status(answer.failure());
  if (!fenced(r, ticket.key, ticket.fence, loaded, now, "load of steps")) return;
  const std::vector<StepRecord>& got = answer.value();
  bool same = got.size() == r.steps.size();
  for (std::size_t i = 0; same && i < got.size(); ++i) {
    same = got[i].name == r.steps[i].name && got[i].result == r.steps[i].result;
  }
  if (!same) {
    fail(got.size() > r.steps.size() ? Check::no_forgotten_replay : Check::steps_once, ticket.key,
         "load_steps under fence " + std::to_string(ticket.fence) + " returned " +
             std::to_string(got.size()) + " steps; the run chain saved " +
             std::to_string(r.steps.size()));
  }
}

void Contract::save_step(const Ticket& ticket, const StepWrite& step, const Status& answer,
                         Time now) {
  KeyRecord& r = keys_[std::string(ticket.key)];
  if (holds(r, ticket.fence) && step.index > r.steps.size()) {
    if (answer || answer.error() != errc::step_mismatch) {
      fail(Check::store_answers, ticket.key,
           "a step saved past the end answered " + status_text(answer));
    }
    return;
  }
  if (!fenced(r, ticket.key, ticket.fence, answer, now, "step")) return;
  r.steps.resize(step.index);
  r.steps.push_back(StepRecord{std::string(step.name), std::string(step.result)});
}

void Contract::keep_request(const Ticket& ticket, std::string_view request, const Status& answer,
                            Time now) {
  KeyRecord& r = keys_[std::string(ticket.key)];
  if (fenced(r, ticket.key, ticket.fence, answer, now, "kept request")) {
    r.request = std::string(request);
  }
}

void Contract::resync_steps(const Ticket& ticket, const std::vector<StepRecord>& steps) {
  KeyRecord& r = keys_[std::string(ticket.key)];
  if (holds(r, ticket.fence)) r.steps = steps;
}

void Contract::request_in_doubt(const Ticket& ticket) {
  KeyRecord& r = keys_[std::string(ticket.key)];
  if (holds(r, ticket.fence)) r.request_in_doubt = true;
}

void Contract::find_abandoned(std::string_view prefix, const Result<std::vector<Abandoned>>& answer,
                              Time now) {
  if (!answer) return;
  for (const Abandoned& a : answer.value()) {
    if (a.key.substr(0, prefix.size()) != prefix) {
      fail(Check::store_answers, a.key, "find_abandoned returned a key outside its prefix");
      return;
    }
    const auto it = keys_.find(a.key);
    const bool abandoned = it != keys_.end() &&
                           (it->second.state == State::released ||
                            (it->second.state == State::held && now >= it->second.lease_until)) &&
                           now < it->second.keep_until && it->second.request &&
                           *it->second.request == a.request;
    if (!abandoned) {
      fail(Check::no_forgotten_replay, a.key,
           "find_abandoned returned a record that is not abandoned with that request (" +
               std::string(it == keys_.end() ? "absent" : to_string(it->second.state)) + ")");
      return;
    }
  }
}

void Contract::release(std::string_view key, Fence only_fence, bool changed, Time /*now*/) {
  KeyRecord& r = keys_[std::string(key)];
  const bool should = r.state == State::held && (only_fence == 0 || r.fence == only_fence);
  if (should != changed) {
    fail(Check::store_answers, key,
         std::string("release ") + (changed ? "changed" : "did not change") + " a " +
             std::string(to_string(r.state)) + " record");
    return;
  }
  if (changed) {
    r.state = State::released;
    r.admin_fenced = std::max(r.admin_fenced, r.fence);
  }
}

void Contract::remove(KeyRecord& r) {
  if (finished(r.state)) ++r.epoch;
  if (r.state != State::absent) r.admin_fenced = std::max(r.admin_fenced, r.fence);
  r.state = State::absent;
  ++r.chain;
  r.steps.clear();
  r.request.reset();
  r.request_in_doubt = false;
  r.result.clear();
}

void Contract::forget(std::string_view key, bool /*changed*/, Time /*now*/) {
  // Removed in any state: the next claim starts a new record, above every fence the key had.
  remove(keys_[std::string(key)]);
}

void Contract::purge_one(const std::string& key, KeyRecord& r, Time now, bool still_there) {
  if (r.state == State::absent) return;
  const Time until = finished(r.state) ? r.expires_at : r.keep_until;
  const bool may_go = now + options_.tolerance >= until;
  const bool must_go = now - options_.tolerance - call_time_ >= until;
  if (!still_there && !may_go) {
    fail(Check::no_forgotten_replay, key,
         std::string("purge removed a ") + std::string(to_string(r.state)) + " record " +
             ms(until - now) + " before its time");
    return;
  }
  if (still_there && must_go) {
    fail(Check::store_answers, key, "purge kept a record past its time");
    return;
  }
  if (!still_there) remove(r);
}

void Contract::wipe() {
  for (auto& [key, r] : keys_) {
    const KeyRecord old = r;
    r = KeyRecord{};
    r.epoch = old.epoch + (old.state != State::absent ? 1 : 0);
    r.chain = old.chain + 1;
    r.landed = old.landed;
  }
  before_.clear();
  savepoints_.clear();
}

void Contract::rolled_back(std::string_view key, Fence fence) {
  const auto it = before_.find(std::pair<std::string, Fence>{std::string(key), fence});
  if (it == before_.end()) return;
  KeyRecord& r = keys_[std::string(key)];
  if (holds(r, fence)) {
    const Fence max_fence = r.max_fence;
    std::vector<KeyRecord::Landed> landed = std::move(r.landed);
    r = it->second;
    r.max_fence = max_fence;  // a rollback never returns a fence
    r.landed = std::move(landed);
  }
  before_.erase(it);
  savepoints_.erase({std::string(key), fence});
}

void Contract::rewound(std::string_view key, Fence fence) {
  const auto it = savepoints_.find(std::pair<std::string, Fence>{std::string(key), fence});
  KeyRecord& r = keys_[std::string(key)];
  if (it == savepoints_.end() || !holds(r, fence)) return;
  r.steps = it->second;
}

const KeyRecord* Contract::find(std::string_view key) const {
  const auto it = keys_.find(key);
  return it == keys_.end() ? nullptr : &it->second;
}

}  // namespace idem::sim
