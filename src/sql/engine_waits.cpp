// The engine's part in waking a caller that waits for a holder (PostgresStore::await_change).

#include <array>
#include <chrono>
#include <string>

#include "sql/engine.hpp"

namespace idem::sql {

Result<std::string> Engine::count_waiter(const Ticket& held) {
  if (Status schema = ensure_schema(); !schema) return schema.failure();
  const Statements& text = backend_->statements();
  if (text.count_waiter.empty()) return std::string{};
  return on_lent_session([&](Session& s) -> Result<std::string> {
    const std::array params{
        Param{.kind = Param::bytes, .string = held.key},
        Param{.kind = Param::integer, .number = static_cast<std::int64_t>(held.fence)}};
    Row row;
    if (!s.first_row(text.count_waiter, params, row, 0) || row.empty() || !row[0]) {
      return std::string{};
    }
    return std::move(*row[0]);
  });
}

// The holder's transaction keeps the key's lock (Session::hold) until it commits or rolls back:
// taking it, with the lock wait bounded by `bound`, returns at that end and not before. The lock
// is let go at once (rollback), so a claim that queued behind it waits no longer.
void Engine::await_transaction(const Ticket& held, std::chrono::milliseconds bound) {
  if (Status schema = ensure_schema(); !schema) return;
  SessionLease s;
  try {
    s = backend_->acquire(bound);
  } catch (...) {
    return;  // no connection within the wait: a pause of nothing, the caller claims again
  }
  try {
    s->begin(bound);
    s->hold(backend_->statements().records, held.key);
    Row row;
    s->first_row("SELECT 1", {}, row, 0);
    s->rollback();
  } catch (...) {
    s->rollback();
    (void)failure(s);  // a lock wait that ran out is the bound passing; a broken session goes
  }
}

}  // namespace idem::sql
