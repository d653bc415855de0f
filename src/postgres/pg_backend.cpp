#include "postgres/pg_backend.hpp"

#include <algorithm>
#include <memory>
#include <utility>

#include "postgres/pg_failure.hpp"
#include "postgres/pg_options.hpp"

namespace idem::pg {

using std::chrono::milliseconds;

PgBackend::PgBackend(PostgresStoreOptions options, Role role)
    : options_(std::move(options)),
      role_(role),
      conninfo_(with_network_defaults(options_.uri)),
      connect_budget_(connect_budget(options_.uri, options_.connect_timeout)),
      text_(sql::kPostgres, options_.table_prefix),
      // Every idle session is probed (one zero-timeout poll) before it is lent.
      pool_(
          detail::PoolOptions{.max_open = options_.pool_size, .probe_idle_after = milliseconds{0}},
          [this](SessionPool::Clock::time_point) {
            return std::make_unique<PgSession>(conninfo_, connect_budget_, text_,
                                               options_.statement_timeout, role_, watchdog_);
          },
          [](const PgSession& session) { return session.looks_alive(); }) {}

PgBackend::~PgBackend() = default;

sql::Session* PgBackend::acquire(milliseconds wait) {
  const milliseconds limit = std::max(wait, options_.acquire_timeout);
  return pool_.acquire(SessionPool::Clock::now() + limit).detach().release();
}

void PgBackend::release(sql::Session* session, bool broken) noexcept {
  SessionPool::Handle s(static_cast<PgSession*>(session));
  s->rollback();
  const bool unusable = broken || !s->is_open();
  pool_.give_back(std::move(s), unusable);
}

void PgBackend::create_schema() {
  sql::Session* s = acquire(milliseconds{0});
  bool broken = false;
  try {
    static_cast<PgSession*>(s)->create_schema(text_);
  } catch (...) {
    broken = !static_cast<PgSession*>(s)->is_open();
    release(s, broken);
    throw;
  }
  release(s, false);
}

Failure PgBackend::failure(std::exception_ptr error, bool& broken,
                           bool transactional_claim) const noexcept {
  return failure_of(std::move(error), broken, transactional_claim);
}

}  // namespace idem::pg
