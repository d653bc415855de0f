#pragma once
// VersionStore: the optimistic-version (CAS) strategy (docs/design.md §12) on memory, SQLite or
// PostgreSQL, chosen by a backend tag: idem::MemoryBackend (idem/memory/entities.hpp),
// SqliteBackend (idem/sqlite/entities.hpp) or PostgresBackend (idem/postgres/entities.hpp).

#include <algorithm>
#include <charconv>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "idem/attempt.hpp"
#include "idem/engine/engine.hpp"
#include "idem/engine/entity.hpp"
#include "idem/engine/entity_guard.hpp"
#include "idem/guard.hpp"
#include "idem/options.hpp"
#include "idem/outcome.hpp"
#include "idem/store_stats.hpp"

namespace idem {

/// The key of a versioned operation: the entity, the version the caller read, and optionally an
/// operation id. Without an id the operation is "the one at expected_version": its repeat
/// replays. With an id the operation is the id itself, at whatever version it ran: a retry with
/// a newer expected version replays it too (what a read-modify-write retry loop needs).
struct VersionKey {
  std::string_view entity;
  std::uint64_t expected_version = 0;
  std::string_view operation{};
};

/// An Outcome with what a version refusal knows: the entity's current version on
/// errc::version_conflict, and how many attempts VersionStore::retry() made.
template <class T>
class [[nodiscard]] VersionOutcome : public Outcome<T> {
 public:
  VersionOutcome(Outcome<T>&& outcome, std::optional<std::uint64_t> current, int attempts = 1)
      : Outcome<T>(std::move(outcome)), current_(current), attempts_(attempts) {}

  /// errc::version_conflict: the version the entity is at now; nullopt otherwise.
  std::optional<std::uint64_t> current_version() const noexcept { return current_; }
  /// Calls of execute() made: 1, or up to CasRetry::attempts under retry().
  int attempts() const noexcept { return attempts_; }

 private:
  std::optional<std::uint64_t> current_;
  int attempts_;
};

/// Bounds of VersionStore::retry().
struct CasRetry {
  int attempts = 10;                          // calls in all, the first included
  std::chrono::milliseconds backoff{1};       // first pause; doubles after each conflict
  std::chrono::milliseconds max_backoff{50};  // longest pause
};

template <class Backend>
struct VersionStoreOptions {
  /// How to reach the database (MemoryBackend: nothing).
  typename Backend::Options backend{};
  /// The user's table: name, id column (default "id"), version column (default "version").
  /// Not used by MemoryBackend.
  EntityTable table{.table = {}, .id_column = "id", .column = "version"};
  /// The guard behind execute(): scope (unset: "version"), in-progress policy (unset: Wait{}, a
  /// claim waits for the entity's current holder), observer, result limits. Fields left unset
  /// keep these defaults (idem::Options).
  Options guard{};
};

/// Optimistic concurrency on a versioned entity, idempotent per operation.
///
/// execute({entity, v}, fn): the claim is the conditional bump `SET version = version + 1 WHERE
/// id = ? AND version = v`, and fn runs while it holds the entity: on SQL inside the claim's
/// transaction (sqlite_transaction(ctx) / pg_transaction(ctx)), which commits the bump, the
/// handler's writes and the op-log row together, or rolls all of them back if fn throws or the
/// process dies; in memory under the entity's lock. The op log records which operation produced
/// each version:
///
/// | the entity is at...                    | execute({entity, v, op}, fn)                        |
/// |----------------------------------------|-----------------------------------------------------|
/// | version v                              | runs fn; the entity moves to v + 1                  |
/// | any version, op already applied        | replays op's stored result                          |
/// | another version, op not applied        | errc::version_conflict, current_version() set       |
/// | held by another caller                 | waits (Options::in_progress) or errc::in_progress   |
/// | no such entity                         | errc::key_invalid                                   |
///
/// Cost (SQL): a claim is BEGIN, op-log lookup, UPDATE, op-log INSERT; commit one UPDATE and
/// COMMIT. A replay is BEGIN, lookup, ROLLBACK. Thread-safe. It runs the guards' protocol engine
/// over its backend: every guard option applies.
template <class Backend>
class VersionStore : public detail::EntityGuard<Backend> {
  using Base = detail::EntityGuard<Backend>;
  using Base::impl_;

 public:
  using Base::options;

  /// What the guard options' unset fields become (idem::Options).
  static constexpr OptionDefaults kDefaults{.scope = "version", .in_progress = Wait{}};

  /// Throws std::invalid_argument for a table or column name that is not an identifier, a bad
  /// table prefix, or guard options out of range.
  explicit VersionStore(VersionStoreOptions<Backend> options)
      : Base(options.backend, detail::EntityKind::version,
             detail::with_default_column(options.table, "version"), std::move(options.guard),
             kDefaults) {}

  template <class Fn>
  [[nodiscard]] VersionOutcome<handler_result_t<Fn>> execute(const VersionKey& key, Fn&& fn) {
    return execute(key, std::string_view{}, std::forward<Fn>(fn));
  }

  /// Runs fn once for the operation (see the class comment). A repeat with another payload is
  /// errc::payload_mismatch.
  template <class Fn>
  [[nodiscard]] VersionOutcome<handler_result_t<Fn>> execute(const VersionKey& key,
                                                             std::string_view payload, Fn&& fn) {
    using R = handler_result_t<Fn>;
    const std::string version = std::to_string(key.expected_version);
    const std::string op = this->op_id(key.operation, 'v', version);
    if (Failure too_long = this->check_length(key.entity, op); too_long.code) {
      return VersionOutcome<R>(Outcome<R>::failed(std::move(too_long)), std::nullopt);
    }
    detail::CasRequest shape{};
    shape.expected_version = key.expected_version;
    auto refuse = [&](const std::string& current) -> Result<Claim> {
      Failure conflict = make_failure(
          errc::version_conflict,
          "entity '" + std::string(key.entity) + "' is at version " + current + ", not " + version);
      if (auto n = parse(current)) conflict.refusal = CurrentVersion{*n};
      return conflict;
    };
    Outcome<R> out = this->template run<R>(key.entity, op, shape, payload, refuse, fn);
    std::optional<std::uint64_t> current;
    if (const auto* v = std::get_if<CurrentVersion>(&out.refusal())) current = v->version;
    return VersionOutcome<R>(std::move(out), current);
  }

  /// A read-modify-write loop: reads the entity's version, runs execute({entity, version,
  /// operation}, payload, fn), and on errc::version_conflict (or in_progress) tries again from
  /// the version the refusal reported, pausing with doubling backoff, at most retry.attempts
  /// calls. fn must read what it modifies inside the claim (the SQL transaction, or under the
  /// memory entity's lock). The operation id makes a retry of an operation that already applied
  /// replay it instead of applying it twice. attempts() says how many calls it took. Pauses go
  /// through the guard's Options::clock.
  template <class Fn>
  [[nodiscard]] VersionOutcome<handler_result_t<Fn>> retry(std::string_view entity,
                                                           std::string_view operation,
                                                           std::string_view payload, Fn&& fn,
                                                           CasRetry policy = {}) {
    using R = handler_result_t<Fn>;
    auto pause = policy.backoff;
    std::optional<std::uint64_t> known;
    for (int attempt = 1;; ++attempt) {
      if (!known) {
        Result<std::uint64_t> read = version(entity);
        if (!read) {
          return VersionOutcome<R>(Outcome<R>::failed(std::move(read).failure()), std::nullopt,
                                   attempt);
        }
        known = read.value();
      }
      VersionOutcome<R> out = execute(VersionKey{entity, *known, operation}, payload, fn);
      const bool again = out.error() == errc::version_conflict || out.error() == errc::in_progress;
      const std::optional<std::uint64_t> current = out.current_version();
      if (!again || attempt >= std::max(policy.attempts, 1)) {
        return VersionOutcome<R>(std::move(out), current, attempt);
      }
      known = current;
      options().clock->sleep_for(pause);  // Options::clock: a ManualClock in tests
      pause = std::min(pause * 2, policy.max_backoff);
    }
  }

  /// The entity's current version, read outside any claim. errc::key_invalid: no such entity.
  Result<std::uint64_t> version(std::string_view entity) {
    Result<std::string> v = impl_.current(entity);
    if (!v) return std::move(v).failure();
    if (auto n = parse(v.value())) return *n;
    return make_failure(errc::record_corrupt, "version of entity '" + std::string(entity) +
                                                  "' is not a number: " + v.value());
  }

  /// MemoryBackend: creates the entity (or sets its version).
  void put(std::string_view entity,
           std::uint64_t version) requires detail::PutsEntities<typename Backend::Impl> {
    impl_.put(entity, std::to_string(version));
  }

 private:
  static std::optional<std::uint64_t> parse(std::string_view s) noexcept {
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec != std::errc{} || end != s.data() + s.size() || s.empty()) return std::nullopt;
    return n;
  }
};

}  // namespace idem
