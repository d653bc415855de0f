#include "postgres/pg_backend.hpp"

#include <algorithm>
#include <memory>
#include <utility>

#include "postgres/pg_failure.hpp"
#include "postgres/pg_options.hpp"

namespace idem::postgres::detail {

using std::chrono::milliseconds;

PgBackend::PgBackend(PostgresStoreOptions options, Role role)
    : options_(std::move(options)),
      role_(role),
      conninfo_(with_network_defaults(options_.connection.uri)),
      connect_budget_(connect_budget(options_.connection.uri, options_.connection.connect_timeout)),
      text_(sql::kPostgres, options_.connection.table_prefix),
      pool_(
          idem::detail::PoolOptions{.max_open = options_.pool.size,
                                    .probe_idle_after = milliseconds{0}},
          [this](SessionPool::Clock::time_point) -> SessionPool::Handle {
            return std::make_unique<PgSession>(conninfo_, connect_budget_, text_,
                                               options_.connection.statement_timeout, role_);
          },
          [](sql::Session& session) { return static_cast<PgSession&>(session).looks_alive(); },
          [](sql::Session& session) {  // ends what the caller left open; drops a closed one
            auto& pg = static_cast<PgSession&>(session);
            pg.rollback();
            return pg.is_open();
          }) {}

PgBackend::~PgBackend() = default;

sql::SessionLease PgBackend::acquire(milliseconds wait) {
  const milliseconds limit = std::max(wait, options_.pool.acquire_timeout);
  return pool_.acquire(SessionPool::Clock::now() + limit);
}

void PgBackend::create_schema() {
  sql::SessionLease s = acquire(milliseconds{0});
  static_cast<PgSession&>(*s).create_schema(text_);  // a failure: the lease drops a closed one
}

Failure PgBackend::failure(std::exception_ptr error, bool& broken,
                           bool transactional_claim) const noexcept {
  return failure_of(std::move(error), broken, transactional_claim);
}

}  // namespace idem::postgres::detail
