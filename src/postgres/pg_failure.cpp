#include "postgres/pg_failure.hpp"

#include <fmt/format.h>

#include <new>
#include <string>
#include <string_view>
#include <utility>

#include "common/connection_pool.hpp"
#include "postgres/pg_session.hpp"
#include "postgres/pqxx_compat.hpp"

namespace idem::postgres::detail {

namespace {

std::string first_line(const char* what) {
  std::string s(what);
  if (auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  return s;
}

Failure unavailable(std::string_view what, const char* detail) {
  return make_failure(errc::store_unavailable,
                      fmt::format("idem: postgres {}: {}", what, first_line(detail)));
}

}  // namespace

Failure failure_of(std::exception_ptr error, bool& broken, bool transactional_claim) noexcept {
  try {
    std::rethrow_exception(std::move(error));
  } catch (const NoReply& e) {
    broken = true;
    return make_failure(errc::store_unavailable, e.what());
  } catch (const pqxx::broken_connection& e) {
    broken = true;
    return unavailable("connection lost or refused", e.what());
  } catch (const pqxx::in_doubt_error& e) {
    broken = true;
    return unavailable("commit in doubt", e.what());
  } catch (const pqxx::sql_error& e) {
    const std::string& state = e.sqlstate();
    if (state == "55P03") {  // lock_not_available: lock_timeout ran out waiting on the holder
      return make_failure(transactional_claim ? errc::in_progress : errc::store_unavailable,
                          fmt::format("idem: postgres: the key is locked by its holder's "
                                      "transaction ({})",
                                      first_line(e.what())));
    }
    if (state.rfind("08", 0) == 0 || state.rfind("57P", 0) == 0) broken = true;
    if (state == "57014") return unavailable("statement timeout", e.what());
    if (state == "25006") {  // read_only_sql_transaction
      return make_failure(errc::store_unavailable,
                          fmt::format("{} ({})", kReadOnly, first_line(e.what())));
    }
    return unavailable(fmt::format("SQLSTATE {}", state), e.what());
  } catch (const UnusableServer& e) {
    return make_failure(errc::store_unavailable, e.what());
  } catch (const idem::detail::PoolExhausted& e) {
    return make_failure(errc::store_unavailable, fmt::format("idem: postgres: {}", e.what()));
  } catch (const std::bad_alloc&) {
    return make_failure(errc::store_unavailable, "idem: postgres store: out of memory");
  } catch (const std::exception& e) {
    broken = true;
    return unavailable("error", e.what());
  } catch (...) {
    broken = true;
    return make_failure(errc::store_unavailable, "idem: postgres store: unknown error");
  }
}

}  // namespace idem::postgres::detail
