#pragma once
// What MemoryStore and MemoryTokenStore share about a record entry: how it looks to the record
// model and how a claim takes it. Each store keeps its own Entry, table and locking.

#include "idem/clock.hpp"
#include "idem/engine/record_model.hpp"
#include "idem/store.hpp"

namespace idem::detail {

/// The entry as the fenced calls see it (no times: check_fence() needs none).
template <class Entry>
RecordView<> record_of(const Entry& e) noexcept {
  return RecordView<>{
      .state = e.state, .fingerprint = e.fingerprint, .fence = e.fence, .result = e.result};
}

/// The entry as a claim at `now` sees it: record_of() and the time left on its lease and
/// retention.
template <class Entry>
RecordView<> record_at(const Entry& e, Clock::time_point now) noexcept {
  RecordView<> view = record_of(e);
  view.lease_left = e.lease_until - now;
  view.expires_in = e.expires_at - now;
  return view;
}

/// Takes `e` for `request`: held under the next fence, leased for request.lease and kept at
/// least held_retention(). Call under the entry's lock.
template <class Entry>
Claim acquire_record(Entry& e, const ClaimRequest& request, Clock::time_point now, bool took_over) {
  e.state = RecordState::held;
  e.fingerprint = request.fingerprint;
  e.fence += 1;
  e.lease_until = now + request.lease;
  e.expires_at = now + held_retention(request.retention, request.lease);
  e.result.clear();
  return Claim{.status = ClaimStatus::acquired, .fence = e.fence, .took_over = took_over};
}

}  // namespace idem::detail
