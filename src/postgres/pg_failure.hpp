#pragma once
// What a PostgreSQL failure means to the caller.

#include <exception>

#include "idem/result.hpp"

namespace idem::postgres::detail {

/// Maps `error` (from PgSession, libpqxx or the pool) as sql::Backend::failure does.
Failure failure_of(std::exception_ptr error, bool& broken, bool transactional_claim) noexcept;

}  // namespace idem::postgres::detail
