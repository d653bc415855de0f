// The SQL engine's steps (idem::StepStore): a table beside the records, one fenced statement each.

#include <algorithm>
#include <array>
#include <charconv>
#include <thread>
#include <utility>

#include "sql/engine.hpp"

namespace idem::sql {

namespace {

// How long an atomic step's statements may wait for another writer's row lock.
constexpr std::chrono::milliseconds kAtomicStepLockWait{5000};

Failure step_failed() {
  return make_failure(errc::handler_failed, "the step failed; its writes were rolled back");
}

Failure lease_lost_failure() {
  return make_failure(errc::lease_lost, "the record is no longer held under this fence");
}

}  // namespace

Session* Engine::held_session(const Ticket& ticket) {
  std::lock_guard lock(open_mutex_);
  if (mode_ == SqlMode::lease) {
    const std::thread::id me = std::this_thread::get_id();
    const auto step = std::find_if(stepping_.rbegin(), stepping_.rend(), [&](const Stepping& s) {
      return s.thread == me && s.fence == ticket.fence && s.key == ticket.key;
    });
    return step == stepping_.rend() ? nullptr : step->session;
  }
  const auto it = find_open(ticket);
  return it == open_.end() ? nullptr : it->second.session.get();
}

void Engine::mark_broken(const Ticket& ticket) {
  std::lock_guard lock(open_mutex_);
  if (const auto it = find_open(ticket); it != open_.end()) it->second.session.discard();
}

template <class Fn>
auto Engine::on_step_session(const Ticket& ticket, Fn&& statement)
    -> Result<decltype(statement(std::declval<Session&>()))> {
  using R = Result<decltype(statement(std::declval<Session&>()))>;
  if (Status schema = ensure_schema(); !schema) return schema.failure();
  // The holder's own session, in the holder's thread (inside its handler).
  if (Session* session = held_session(ticket)) {
    try {
      return statement(*session);
    } catch (...) {
      bool broken = false;
      return failure(broken);
    }
  }
  if (mode_ == SqlMode::transactional) return lease_lost_failure();
  return on_lent_session([&](Session& s) -> R { return statement(s); });
}

Result<std::vector<StepRecord>> Engine::load_steps(const Ticket& ticket) {
  const std::array<Param, 2> params{
      {{Param::bytes, 0, ticket.key},
       {Param::integer, static_cast<std::int64_t>(ticket.fence), {}}}};
  const std::string& text = backend_->statements().load_steps;
  Result<std::vector<Row>> rows = on_step_session(
      ticket, [&](Session& s) { return s.rows(text, params, /*name, result*/ 0b110u); });
  if (!rows) return std::move(rows).failure();
  if (rows->empty()) return lease_lost_failure();
  std::vector<StepRecord> steps;
  for (Row& row : rows.value()) {
    if (row.size() != 3 || !row[0]) break;  // the one row of a record without steps
    std::int64_t index = -1;
    const std::string& cell = *row[0];
    std::from_chars(cell.data(), cell.data() + cell.size(), index);
    // A gap (a step of another payload's run, filtered out): this run's steps end there.
    if (index != static_cast<std::int64_t>(steps.size())) break;
    steps.push_back(StepRecord{row[1] ? std::move(*row[1]) : std::string{},
                               row[2] ? std::move(*row[2]) : std::string{}});
  }
  return steps;
}

Status Engine::save_step(const Ticket& ticket, const StepWrite& step) {
  return save_row(ticket, static_cast<std::int64_t>(step.index), step.name, step.result);
}

Status Engine::keep_request(const Ticket& ticket, std::string_view request) {
  return save_row(ticket, -1, {}, request);
}

Result<std::vector<Abandoned>> Engine::find_abandoned(std::string_view prefix, std::size_t limit) {
  if (Status schema = ensure_schema(); !schema) return schema.failure();
  const std::array<Param, 3> params{
      {{Param::bytes, 0, prefix},
       {Param::integer, static_cast<std::int64_t>(limit), {}},
       {Param::integer, static_cast<std::int64_t>(prefix.size()), {}}}};
  Result<std::vector<Row>> rows = on_lent_session([&](Session& s) -> Result<std::vector<Row>> {
    return s.rows(backend_->statements().find_abandoned, params, 0b11u);
  });
  if (!rows) return std::move(rows).failure();
  std::vector<Abandoned> found;
  for (Row& row : rows.value()) {
    if (row.size() != 2 || !row[0]) continue;
    found.push_back(Abandoned{std::move(*row[0]), row[1] ? std::move(*row[1]) : std::string{}});
  }
  return found;
}

Status Engine::save_row(const Ticket& ticket, std::int64_t index, std::string_view name,
                        std::string_view result) {
  const std::array<Param, 5> params{
      {{Param::bytes, 0, ticket.key},
       {Param::integer, index, {}},
       {Param::bytes, 0, name},
       {Param::bytes, 0, result},
       {Param::integer, static_cast<std::int64_t>(ticket.fence), {}}}};
  const std::string& text = backend_->statements().save_step;
  Result<std::int64_t> saved =
      on_step_session(ticket, [&](Session& s) { return s.run(text, params); });
  if (!saved) return std::move(saved).failure();
  if (saved.value() != 1) return lease_lost_failure();
  return {};
}

Status Engine::step_in_savepoint(Session& session, const Ticket& ticket, std::uint32_t index,
                                 std::string_view name, AtomicStepBody body) {
  bool broken = false;
  try {
    session.step_savepoint();
  } catch (...) {
    Failure f = failure(broken);
    if (broken) mark_broken(ticket);
    return f;
  }
  std::string result;
  Status answer = body.run(body.state, session.native(), result)
                      ? save_step(ticket, StepWrite{index, name, result})
                      : Status(step_failed());
  try {
    session.end_step(answer.ok());
  } catch (...) {
    Failure f = failure(broken);
    if (broken) mark_broken(ticket);
    return f;
  }
  return answer;
}

Status Engine::save_step_atomically(const Ticket& ticket, std::uint32_t index,
                                    std::string_view name, AtomicStepBody body) {
  // In the handler's (or outer step's) transaction, a savepoint takes the step's writes back if
  // it fails and leaves that transaction usable.
  if (Session* joined = held_session(ticket)) {
    return step_in_savepoint(*joined, ticket, index, name, body);
  }
  if (mode_ == SqlMode::transactional) return lease_lost_failure();
  if (Status schema = ensure_schema(); !schema) return schema;
  SessionLease session;
  try {
    session = backend_->acquire(std::chrono::milliseconds{0});
  } catch (...) {
    bool broken = false;
    return failure(broken);
  }
  Status answer;
  try {
    session->begin(kAtomicStepLockWait);
    const std::array<Param, 2> held{
        {{Param::bytes, 0, ticket.key},
         {Param::integer, static_cast<std::int64_t>(ticket.fence), {}}}};
    std::string result;
    if (session->rows(backend_->statements().holding, held, 0).empty()) {
      session->rollback();
      answer = lease_lost_failure();
    } else if (!run_stepping(*session, ticket, body, result)) {
      session->rollback();
      answer = step_failed();
    } else {
      const std::array<Param, 5> params{
          {{Param::bytes, 0, ticket.key},
           {Param::integer, static_cast<std::int64_t>(index), {}},
           {Param::bytes, 0, name},
           {Param::bytes, 0, result},
           {Param::integer, static_cast<std::int64_t>(ticket.fence), {}}}};
      // The fenced save comes last: on PostgreSQL it locks the record's row until the commit,
      // so a takeover either came first (nothing saved, everything rolls back) or waits for it.
      if (session->run(backend_->statements().save_step, params) != 1) {
        session->rollback();
        answer = lease_lost_failure();
      } else {
        session->commit();
      }
    }
  } catch (...) {
    answer = failure(session);
    session->rollback();
  }
  return answer;
}

bool Engine::run_stepping(Session& session, const Ticket& ticket, AtomicStepBody body,
                          std::string& result) {
  const std::thread::id me = std::this_thread::get_id();
  {
    std::lock_guard lock(open_mutex_);
    stepping_.push_back(Stepping{std::string(ticket.key), ticket.fence, me, &session});
  }
  const bool ran = body.run(body.state, session.native(), result);  // catches what fn throws
  std::lock_guard lock(open_mutex_);
  for (auto it = stepping_.begin(); it != stepping_.end(); ++it) {
    if (it->session == &session) {
      stepping_.erase(it);
      break;
    }
  }
  return ran;
}

}  // namespace idem::sql
