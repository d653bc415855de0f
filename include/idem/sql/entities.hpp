#pragma once
// The entity stores' SQL backend, written once over the SQL layer (src/sql/entity_engine.cpp);
// SQLite and PostgreSQL differ only in the session and dialect they hand it
// (idem/sqlite/entities.hpp, idem/postgres/entities.hpp). Names no third-party type.

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "idem/engine/entity.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"
#include "idem/store_stats.hpp"

namespace idem::detail {

/// Runs the claim as a conditional UPDATE of the user's table plus an op-log insert, in a
/// transaction that stays open for the handler; commit writes the result into the op log and
/// commits, abort rolls back. Thread-safe; movable.
class SqlEntities {
 public:
  struct Impl;
  explicit SqlEntities(std::unique_ptr<Impl> impl);
  SqlEntities(SqlEntities&&) noexcept;
  SqlEntities& operator=(SqlEntities&&) noexcept;
  ~SqlEntities();

  Result<CasAnswer> claim(const CasRequest& request);
  Status commit(const Ticket& ticket, const Completion& completion);
  Status abort(const Ticket& ticket);
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease);
  /// Rolls a rewindable claim back to just after its op-log row: the entity's move and the
  /// handler's writes are undone, the operation stays held (see idem::RewindableStore).
  Status rewind(const Ticket& ticket);
  /// The entity's version (decimal) or state, read outside any transaction.
  Result<std::string> current(std::string_view entity);
  /// Creates the op-log table if absent (claim does it on first use).
  Status ensure_schema();
  /// The op log's table name (<table_prefix>entity_ops).
  const std::string& op_log_table() const noexcept;
  /// The backend's name ("sqlite", "postgres") and its connection pool's figures.
  StoreStats stats() const noexcept;

 private:
  std::unique_ptr<Impl> impl_;
};

/// A SQL database's backend tag for the entity stores: its store options, and `Open`, the
/// compiled library's function that opens SqlEntities on the user's table from them.
template <class StoreOptions,
          SqlEntities (*Open)(const StoreOptions&, EntityKind, const EntityTable&)>
struct SqlEntityBackend {
  using Options = StoreOptions;
  using Impl = SqlEntities;
  static Impl open(const Options& options, EntityKind kind, const EntityTable& table) {
    return Open(options, kind, table);
  }
};

}  // namespace idem::detail
