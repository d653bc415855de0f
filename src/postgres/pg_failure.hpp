#pragma once
// What a PostgreSQL failure means to the caller, for both connection cores.

#include <exception>
#include <string_view>

#include "idem/result.hpp"

namespace idem::postgres::detail {

/// The server's error `sqlstate` with its `message` (first line); sets `broken` when it ended the
/// connection. In a `transactional_claim` a lock wait that ran out means errc::in_progress.
Failure statement_failure(std::string_view sqlstate, std::string_view message,
                          bool transactional_claim, bool& broken);

/// Maps `error` (from PgLink, PgSession or the pool) as sql::Backend::failure does.
Failure failure_of(std::exception_ptr error, bool& broken, bool transactional_claim) noexcept;

}  // namespace idem::postgres::detail
