#pragma once
// The opt-in replay path over a read-only replica: a settled record still live by the replica's
// clock never changes until it expires, so it answers as the primary would; anything else goes
// to the primary (docs/sql.md#replicas).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "idem/postgres/store.hpp"
#include "idem/store_stats.hpp"
#include "sql/engine.hpp"

namespace idem::sql {

class ReplicaReads {
 public:
  /// `retry_after`: after a failed read, claims go straight to the primary for this long, so a
  /// dead replica costs one connect timeout per period rather than one per claim.
  ReplicaReads(std::unique_ptr<Backend> backend, std::chrono::milliseconds retry_after);

  /// The key's settled, live record on the replica; nullopt: ask the primary. Never throws.
  std::optional<ClaimRow> settled(std::string_view key) noexcept;

  ReplicaCounters counters() const noexcept;
  ReplicaStats stats() const noexcept;

 private:
  struct alignas(64) Slot {
    std::atomic<std::uint64_t> value{0};
  };
  static void bump(Slot& slot) noexcept { slot.value.fetch_add(1, std::memory_order_relaxed); }
  std::optional<ClaimRow> fall_through() noexcept;
  std::optional<ClaimRow> failed() noexcept;

  std::unique_ptr<Backend> backend_;
  std::chrono::milliseconds retry_after_;
  std::atomic<std::int64_t> resting_until_{0};  // steady_clock ticks
  Slot hits_, fall_throughs_, errors_;
};

}  // namespace idem::sql
