#include "sql/replica_reads.hpp"

#include <exception>
#include <utility>

namespace idem::sql {

namespace {

using Clock = std::chrono::steady_clock;

bool is_settled(std::int16_t column) noexcept {
  const std::optional<detail::RecordState> state = detail::from_sql(column);
  return state == detail::RecordState::completed || state == detail::RecordState::failed;
}

}  // namespace

ReplicaReads::ReplicaReads(std::unique_ptr<Backend> backend, std::chrono::milliseconds retry_after)
    : backend_(std::move(backend)), retry_after_(retry_after) {}

std::optional<ClaimRow> ReplicaReads::fall_through() noexcept {
  bump(fall_throughs_);
  return std::nullopt;
}

std::optional<ClaimRow> ReplicaReads::failed() noexcept {
  bump(errors_);
  const auto until = Clock::now() + retry_after_;
  resting_until_.store(until.time_since_epoch().count(), std::memory_order_relaxed);
  return fall_through();
}

std::optional<ClaimRow> ReplicaReads::settled(std::string_view key) noexcept {
  if (Clock::now().time_since_epoch().count() < resting_until_.load(std::memory_order_relaxed)) {
    return fall_through();
  }
  SessionLease session;
  try {
    session = backend_->acquire(std::chrono::milliseconds{0});
  } catch (const PoolBusy&) {
    return fall_through();  // a busy replica is no fault of the replica's
  } catch (...) {
    return failed();
  }
  std::optional<ClaimRow> row;
  try {
    row = session->read(key);
  } catch (...) {
    bool broken = false;
    (void)backend_->failure(std::current_exception(), broken, false);
    if (broken) session.discard();
    return failed();
  }
  session.reset();  // back to the pool before the answer is worked out
  if (!row || !is_settled(row->state) || row->expire_left_ms <= 0) return fall_through();
  bump(hits_);
  return row;
}

ReplicaCounters ReplicaReads::counters() const noexcept {
  auto get = [](const Slot& s) { return s.value.load(std::memory_order_relaxed); };
  return ReplicaCounters{
      .hits = get(hits_), .fall_throughs = get(fall_throughs_), .errors = get(errors_)};
}

ReplicaStats ReplicaReads::stats() const noexcept {
  const ReplicaCounters c = counters();
  return ReplicaStats{.hits = c.hits,
                      .fall_throughs = c.fall_throughs,
                      .errors = c.errors,
                      .pool = backend_->pool_stats()};
}

}  // namespace idem::sql
