#include "postgres/pg_failure.hpp"

#include <fmt/format.h>

#include <new>
#include <string>
#include <utility>

#include "common/connection_pool.hpp"
#include "postgres/pg_link.hpp"
#include "postgres/pg_options.hpp"

namespace idem::postgres::detail {

namespace {

Failure unavailable(std::string_view what, std::string_view detail) {
  return make_failure(errc::store_unavailable, fmt::format("idem: postgres {}: {}", what, detail));
}

}  // namespace

Failure statement_failure(std::string_view state, std::string_view message,
                          bool transactional_claim, bool& broken) {
  if (state == "55P03") {  // lock_not_available: lock_timeout ran out waiting on the holder
    return make_failure(transactional_claim ? errc::in_progress : errc::store_unavailable,
                        fmt::format("idem: postgres: the key is locked by its holder's "
                                    "transaction ({})",
                                    message));
  }
  if (state == "42501") {  // insufficient_privilege: a grant to fix, not an outage to wait out
    return make_failure(
        errc::config_invalid,
        fmt::format("idem: postgres: the role lacks a right idem needs: {}", message));
  }
  if (state.starts_with("08") || state.starts_with("57P")) broken = true;
  if (state == "57014") return unavailable("statement timeout", message);
  if (state == "25006") {  // read_only_sql_transaction
    return make_failure(errc::store_unavailable, fmt::format("{} ({})", kReadOnly, message));
  }
  return unavailable(fmt::format("SQLSTATE {}", state), message);
}

Failure failure_of(std::exception_ptr error, bool& broken, bool transactional_claim) noexcept {
  try {
    std::rethrow_exception(std::move(error));
  } catch (const PgError& e) {
    return statement_failure(e.sqlstate, e.what(), transactional_claim, broken);
  } catch (const NoReply& e) {
    broken = true;
    return make_failure(errc::store_unavailable, e.what());
  } catch (const LinkLost& e) {
    broken = true;
    return unavailable("connection lost or refused", e.what());
  } catch (const UnusableServer& e) {
    return make_failure(errc::store_unavailable, e.what());
  } catch (const idem::detail::PoolExhausted& e) {
    return make_failure(errc::store_unavailable, fmt::format("idem: postgres: {}", e.what()));
  } catch (const std::bad_alloc&) {
    return make_failure(errc::store_unavailable, "idem: postgres store: out of memory");
  } catch (const std::exception& e) {  // libpqxx's, from the handler's transaction at its end
    broken = true;
    return unavailable("error", e.what());
  } catch (...) {
    broken = true;
    return make_failure(errc::store_unavailable, "idem: postgres store: unknown error");
  }
}

}  // namespace idem::postgres::detail
