#pragma once
// What MemoryStore and MemoryTokenStore share about a record entry: how a claim takes it and
// whether a ticket still holds it. Each store keeps its own Entry (with its own State enum,
// which must have an in_progress value) and its own table and locking.

#include <algorithm>

#include "idem/clock.hpp"
#include "idem/store.hpp"

namespace idem::detail {

/// Takes `e` for `request`: in progress under the next fence, leased for request.lease and kept
/// at least as long as the retention (or the lease). Call under the entry's lock.
template <class Entry>
Claim acquire_record(Entry& e, const ClaimRequest& request, Clock::time_point now, bool took_over) {
  e.state = decltype(e.state)::in_progress;
  e.fingerprint = request.fingerprint;
  e.fence += 1;
  e.lease_until = now + request.lease;
  e.expires_at = now + std::max(request.retention, request.lease);
  e.result.clear();
  return Claim{.status = ClaimStatus::acquired, .fence = e.fence, .took_over = took_over};
}

/// Whether a ticket under `fence` still holds `e` (it is in progress under that fence).
template <class Entry>
bool held_under(const Entry& e, Fence fence) noexcept {
  return e.fence == fence && e.state == decltype(e.state)::in_progress;
}

/// Whether `e` holds `completion` as committed under `fence`: the same fence, state and result
/// bytes. A commit retried after its answer was lost finds its own commit so, and succeeds.
template <class Entry>
bool committed_under(const Entry& e, Fence fence, const Completion& completion) noexcept {
  using State = decltype(e.state);
  const State done = completion.status == ClaimStatus::failed ? State::failed : State::completed;
  return e.fence == fence && e.state == done && e.result == completion.result;
}

}  // namespace idem::detail
