#pragma once
// What a PostgreSQL failure means to the caller: the exceptions a session, its connection or the
// pool throw, mapped to idem's errc with a clear message, and whether the connection is lost.

#include <exception>

#include "idem/result.hpp"

namespace idem::postgres::detail {

/// Maps `error` (from PgSession, libpqxx or the pool) to a Failure; sets `broken` when the
/// connection must not be reused. `transactional_claim`: the error came from a transactional
/// claim, where a lock wait running out means errc::in_progress.
Failure failure_of(std::exception_ptr error, bool& broken, bool transactional_claim) noexcept;

}  // namespace idem::postgres::detail
