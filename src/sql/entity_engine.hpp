#pragma once
// The entity stores' SQL engine, built by the adapters from their backend and dialect.

#include <memory>
#include <string>

#include "idem/sql/entities.hpp"
#include "sql/engine.hpp"
#include "sql/statements.hpp"

namespace idem::sql {

/// Checks every identifier (std::invalid_argument) and builds the statement text once.
detail::SqlEntities make_entities(std::unique_ptr<Backend> backend, const Dialect& dialect,
                                  detail::EntityKind kind, const EntityTable& table,
                                  const std::string& op_log_prefix);

}  // namespace idem::sql

namespace idem::detail {

/// An op-log row (state, fp_hi, fp_lo, fence, result) as the claim's answer; a row idem did not
/// write is errc::record_corrupt.
Result<CasAnswer> stored_operation(const sql::Row& row, const Fingerprint& fingerprint);

}  // namespace idem::detail
