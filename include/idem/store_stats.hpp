#pragma once
// StoreStats: a store's own figures, read with its stats() without a round trip: its connection
// pool, records in memory, cache, group commit, and the parts a backend adds (StatParts). The
// guard's view of calls is the Observer's. docs/operations.md lists them.

#include <any>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace idem {

/// A connection pool: counts since the store was made, and what it holds now.
struct PoolStats {
  std::size_t size = 0;         ///< most connections open at once (the pool_size option)
  std::size_t in_use = 0;       ///< connections lent to a call, or being opened, now
  std::size_t idle = 0;         ///< connections open and idle now
  std::uint64_t opened = 0;     ///< connections opened
  std::uint64_t reused = 0;     ///< calls served by a connection already open
  std::uint64_t discarded = 0;  ///< connections closed after a failure, or found closed
  std::uint64_t waits = 0;      ///< calls that found every connection busy and queued
  std::uint64_t timeouts = 0;   ///< of those, calls that gave up (errc::store_unavailable)
};

/// One number of a store's own figures, as an exporter shows it: a metric family, at most one
/// label that tells the number from its siblings in the family, and the value.
struct StatFigure {
  std::string_view family;         ///< the metric family ("store_redis_events_total")
  std::string_view help;           ///< the family's help text
  bool counter = true;             ///< a count since the store was made; false: a gauge, now
  std::string_view label{};        ///< the label's name ("event"); empty: none
  std::string_view label_value{};  ///< its value ("moved")
  std::uint64_t value = 0;
};

/// Where a backend's own figures go: an exporter (the Prometheus collector) implements it, and a
/// backend's part of StoreStats reports to it, so that neither names the other.
class StatSink {
 public:
  virtual ~StatSink() = default;
  /// One number.
  virtual void figure(const StatFigure& figure) = 0;
  /// A connection pool of the store's beside its own (`name`: "replica"), shown as the store's
  /// own pool is.
  virtual void pool(std::string_view name, const PoolStats& pool) = 0;

  /// A family of counters told apart by one label: one figure per (label value, count).
  void counters(std::string_view family, std::string_view help, std::string_view label,
                std::initializer_list<std::pair<std::string_view, std::uint64_t>> counts) {
    for (const auto& [value, count] : counts) {
      figure(
          {.family = family, .help = help, .label = label, .label_value = value, .value = count});
    }
  }
};

/// What a backend adds to StoreStats: any copyable type with `void report(StatSink&) const`.
template <class P>
concept StatPart = std::copyable<P> && requires(const P& part, StatSink& sink) {
  part.report(sink);
};

/// The backends' own parts of a StoreStats, one per type (the Redis stores' RedisStats, a
/// PostgresStore's ReplicaStats): read typed with get<P>(), or all of them through a StatSink.
class StatParts {
 public:
  /// Sets the part of P's type, replacing one set before; returns it.
  template <StatPart P>
  P& set(P part) {
    if (P* held = get<P>()) return *held = std::move(part);
    entries_.push_back(Entry{std::move(part), &report_part<P>});
    return *std::any_cast<P>(&entries_.back().part);
  }
  /// The part of P's type, or nullptr when the store has none.
  template <StatPart P>
  const P* get() const noexcept {
    for (const Entry& entry : entries_) {
      if (const P* part = std::any_cast<P>(&entry.part)) return part;
    }
    return nullptr;
  }
  template <StatPart P>
  P* get() noexcept {
    return const_cast<P*>(std::as_const(*this).get<P>());
  }
  bool empty() const noexcept { return entries_.empty(); }
  /// Every part's figures, in the order the parts were set.
  void report(StatSink& sink) const {
    for (const Entry& entry : entries_) entry.report(entry.part, sink);
  }

 private:
  template <class P>
  static void report_part(const std::any& part, StatSink& sink) {
    std::any_cast<const P&>(part).report(sink);
  }
  struct Entry {
    std::any part;
    void (*report)(const std::any&, StatSink&);
  };
  std::vector<Entry> entries_;
};

/// CachedStore's figures, beside those of the store it wraps.
struct CacheStats {
  std::uint64_t entries = 0;    ///< cached records now (expired ones not yet dropped included)
  std::uint64_t hits = 0;       ///< claims answered from the cache
  std::uint64_t misses = 0;     ///< claims passed on to the wrapped store
  std::uint64_t evictions = 0;  ///< cached records dropped by the entry or byte bound
};

/// GroupCommitStore's figures, beside those of the store it writes to.
struct GroupStats {
  std::uint64_t groups = 0;  ///< groups written
  std::uint64_t calls = 0;   ///< calls they carried (calls / groups: the mean group size)
};

/// One store's figures; a part is set when the store has it.
struct StoreStats {
  std::string_view store{};                  ///< the store's kStoreName ("memory", "sqlite", ...)
  std::optional<std::uint64_t> records{};    ///< records held now (in-memory stores)
  std::optional<std::uint64_t> evictions{};  ///< records evicted by the capacity bound (memory)
  std::optional<PoolStats> pool{};           ///< the connection pool (Redis: all servers' summed)
  std::optional<CacheStats> cache{};         ///< a CachedStore (the rest: its wrapped store's)
  std::optional<GroupStats> group{};         ///< a GroupCommitStore (the rest: its store's)
  /// The backend's own figures: RedisStats (idem/redis/stats.hpp), ReplicaStats
  /// (idem/sql/stats.hpp), read as `stats.parts.get<idem::RedisStats>()`.
  StatParts parts{};
};

/// A store that reports its own figures.
template <class S>
concept HasStoreStats = requires(const S& s) {
  { s.stats() } -> std::convertible_to<StoreStats>;
};

/// `store`'s figures, or none when it has no stats(): what a wrapping store starts from before
/// adding its own part.
template <class S>
StoreStats stats_of(const S& store) {
  if constexpr (HasStoreStats<S>) {
    return store.stats();
  } else {
    return StoreStats{};
  }
}

}  // namespace idem
