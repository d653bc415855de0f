#include "sql/engine.hpp"

#include <algorithm>
#include <utility>

#include "sql/replica_reads.hpp"

namespace idem::sql {

namespace {

using std::chrono::milliseconds;

// A record may change between the claim and the read of what was in the way: ask again.
constexpr int kClaimAttempts = 4;

Status lease_lost() {
  return Status(errc::lease_lost, "the record is no longer held under this fence");
}

State finished_state(const Completion& completion) {
  return detail::to_sql(detail::finished_state(completion.status));
}

detail::RecordView<milliseconds> view_of(const ClaimRow& row, detail::RecordState state) {
  return {.state = state,
          .fingerprint = row.fingerprint,
          .fence = row.fence,
          .lease_left = milliseconds{row.lease_left_ms},
          .expires_in = milliseconds{row.expire_left_ms},
          .result = row.result};
}

// A commit whose session broke after the finish was sent: it may or may not have landed.
Failure in_doubt(Failure f, std::string_view what) {
  f.code = make_error_code(errc::outcome_unknown);
  f.message = std::string(what) + f.describe();
  return f;
}

// A commit retried after its answer was lost finds its own commit landed. Asked only when the
// fenced finish matched nothing: the usual path costs nothing more.
bool landed(Session& session, const Ticket& ticket, const Completion& completion) {
  const std::optional<ClaimRow> row = session.read(ticket.key);
  if (!row) return false;
  const std::optional<detail::RecordState> state = detail::from_sql(row->state);
  return state && detail::check_fence(view_of(*row, *state), ticket.fence, &completion) ==
                      detail::FenceCheck::landed;
}

}  // namespace

Engine::Engine(std::unique_ptr<Backend> backend, SqlMode mode,
               std::shared_ptr<ReplicaReads> replica)
    : backend_(std::move(backend)), mode_(mode), replica_(std::move(replica)) {}

Engine::~Engine() {
  // Holders that never finished: their transactions roll back.
  for (auto& [key, open] : open_) open.session->rollback();
}

StoreStats Engine::stats() const noexcept {
  StoreStats out{.store = backend_->store_name(), .pool = backend_->pool_stats()};
  if (replica_) out.parts.set(replica_->stats());
  return out;
}

Failure Engine::failure(bool& broken, bool transactional_claim) const noexcept {
  return backend_->failure(std::current_exception(), broken, transactional_claim);
}

Failure Engine::failure(SessionLease& session, bool transactional_claim) const noexcept {
  bool broken = false;
  Failure f = failure(broken, transactional_claim);
  if (broken) session.discard();
  return f;
}

Status Engine::ensure_schema() {
  if (schema_ready_.load(std::memory_order_acquire)) return {};
  std::lock_guard lock(schema_mutex_);
  if (schema_ready_.load(std::memory_order_relaxed)) return {};
  try {
    backend_->create_schema();
  } catch (...) {
    bool broken = false;
    return failure(broken);
  }
  schema_ready_.store(true, std::memory_order_release);
  return {};
}

Result<Claim> Engine::claim(const ClaimRequest& request) {
  if (request.key.empty()) return make_failure(errc::key_invalid, "effective key is empty");
  if (replica_) {
    if (std::optional<ClaimRow> row = replica_->settled(request.key)) {
      if (auto answer = classify(*row, request)) return std::move(*answer);
    }
  }
  if (Status schema = ensure_schema(); !schema) return schema.failure();
  // Transactional claims wait on the holder's lock (block_for) rather than after it: no read.
  // A backend whose claim reads first needs no read of its own before it.
  if (request.after_wait && mode_ == SqlMode::lease && !backend_->claim_reads_first()) {
    if (auto answer = settled_answer(request)) return std::move(*answer);
  }
  return mode_ == SqlMode::lease ? claim_lease(request) : claim_transactional(request);
}

std::optional<Result<Claim>> Engine::settled_answer(const ClaimRequest& request) {
  std::optional<ClaimRow> row;
  try {
    SessionLease s = backend_->acquire(milliseconds{0});
    try {
      row = s->read(request.key);
    } catch (...) {
      (void)failure(s);  // drops a broken session; the claim below says what went wrong
      return std::nullopt;
    }
  } catch (...) {
    return std::nullopt;
  }
  // Only a finished record is answered from the read. A holder's row may be one this process
  // has not committed yet (transactional mode), whose answer is the claim's to give.
  const std::optional<detail::RecordState> state =
      row ? detail::from_sql(row->state) : std::nullopt;
  const bool settled =
      state == detail::RecordState::completed || state == detail::RecordState::failed;
  if (!settled || row->expire_left_ms <= 0) return std::nullopt;
  return classify(*row, request);
}

std::optional<Result<Claim>> Engine::classify(const ClaimRow& row, const ClaimRequest& request) {
  if (row.acquired) {
    return Result<Claim>(
        Claim{.status = ClaimStatus::acquired, .fence = row.fence, .took_over = row.took_over});
  }
  const std::optional<detail::RecordState> state = detail::from_sql(row.state);
  if (!state) {
    return Result<Claim>(
        make_failure(errc::record_corrupt,
                     row.state == kMalformedState
                         ? std::string("SQL record has columns of other types than idem writes")
                         : "SQL record has unknown state " + std::to_string(row.state)));
  }
  Claim answer = detail::classify(view_of(row, *state), request.fingerprint);
  // The statement takes every record a claim may take: finding one means it changed. Ask again.
  if (answer.status == ClaimStatus::acquired) return std::nullopt;
  return Result<Claim>(std::move(answer));
}

Result<Claim> Engine::claim_lease(const ClaimRequest& request) {
  const ClaimArgs args{request.key, request.fingerprint, request.lease.count(),
                       held_retention(request.retention, request.lease).count(), 1};
  SessionLease s;
  try {
    s = backend_->acquire(milliseconds{0});
  } catch (...) {
    bool broken = false;
    return failure(broken);
  }
  try {
    for (int attempt = 0; attempt < kClaimAttempts; ++attempt) {
      std::optional<ClaimRow> row = s->claim(args);
      if (!row) continue;
      if (auto answer = classify(*row, request)) return std::move(*answer);
    }
  } catch (...) {
    return failure(s);
  }
  return make_failure(errc::in_progress, "the record kept changing under the claim; retry");
}

std::optional<Claim> Engine::held_here(const ClaimRequest& request) {
  std::lock_guard lock(open_mutex_);
  auto [first, last] = open_.equal_range(request.key);
  if (first == last) return std::nullopt;
  const Open& open = std::prev(last)->second;  // the newest holder
  if (open.fingerprint != request.fingerprint) {
    return Claim{.status = ClaimStatus::mismatch, .fence = open.fence};
  }
  const auto left =
      std::chrono::ceil<milliseconds>(open.lease_until - std::chrono::steady_clock::now());
  return Claim{.status = ClaimStatus::in_progress,
               .fence = open.fence,
               .lease_remaining = std::max(left, milliseconds{0})};
}

Result<Claim> Engine::claim_transactional(const ClaimRequest& request) {
  // A holder in this process keeps the row locked: without leave to block, answer at once.
  if (request.block_for.count() <= 0) {
    if (std::optional<Claim> held = held_here(request)) return *held;
  }
  const ClaimArgs args{request.key, request.fingerprint, request.lease.count(),
                       held_retention(request.retention, request.lease).count(), 1};
  SessionLease s;
  try {
    s = backend_->acquire(request.block_for);
  } catch (...) {
    bool broken = false;
    return busy(request, failure(broken, /*transactional_claim=*/true));
  }
  try {
    s->begin(request.block_for);
  } catch (...) {
    return busy(request, failure(s, /*transactional_claim=*/true));
  }
  try {
    for (int attempt = 0; attempt < kClaimAttempts; ++attempt) {
      std::optional<ClaimRow> row = s->claim(args);
      if (!row) continue;
      if (row->acquired) {
        // A remembered failure must commit without the handler's writes: mark where they begin.
        if (request.rewindable) s->mark();
        Claim claim{.status = ClaimStatus::acquired,
                    .fence = row->fence,
                    .took_over = row->took_over,
                    .transaction = s->native()};
        std::lock_guard lock(open_mutex_);
        open_.emplace(
            std::string(request.key),
            Open{row->fence, request.fingerprint, std::chrono::steady_clock::now() + request.lease,
                 std::move(s), request.rewindable});
        return claim;
      }
      if (auto answer = classify(*row, request)) {
        s->rollback();  // nothing was written: end the transaction, free the lock
        return std::move(*answer);
      }
    }
    s->rollback();
  } catch (...) {
    Failure f = failure(s, /*transactional_claim=*/true);
    s->rollback();
    return busy(request, std::move(f));
  }
  return make_failure(errc::in_progress, "the record kept changing under the claim; retry");
}

Result<Claim> Engine::busy(const ClaimRequest& request, Failure f) {
  if (f.code != errc::in_progress) {
    if (std::optional<Claim> held = held_here(request)) return *held;
  }
  return f;
}

Engine::Registry::iterator Engine::find_open(const Ticket& ticket) {
  auto [it, last] = open_.equal_range(ticket.key);
  while (it != last && it->second.fence != ticket.fence) ++it;
  return it == last ? open_.end() : it;
}

std::optional<Engine::Open> Engine::take_open(const Ticket& ticket) {
  std::lock_guard lock(open_mutex_);
  const auto it = find_open(ticket);
  if (it == open_.end()) return std::nullopt;
  Open open = std::move(it->second);
  open_.erase(it);
  return open;
}

void Engine::forget_ended_before(std::chrono::steady_clock::time_point t) {
  while (!ended_.empty() && ended_.front().at < t) ended_.pop_front();
}

Status Engine::finish_ended(const Ticket& ticket, const Completion* completion) {
  std::optional<Ended> ended;
  {
    std::lock_guard lock(open_mutex_);
    const auto now = std::chrono::steady_clock::now();
    forget_ended_before(now - kEndedKeptFor);
    for (const Ended& e : ended_) {
      if (e.fence == ticket.fence && e.key == ticket.key) {
        ended.emplace(e);
        break;
      }
    }
  }
  if (!ended) return lease_lost();
  if (ended->in_doubt && completion != nullptr) {
    // The COMMIT may have landed before the connection went: the table says whether it did.
    bool broken = false;
    try {
      SessionLease s = backend_->acquire(milliseconds{0});
      try {
        if (landed(*s, ticket, *completion)) return {};
      } catch (...) {
        (void)failure(s);  // still unknown: the remembered answer says so
      }
    } catch (...) {
      (void)failure(broken);
    }
  }
  return ended->failure;
}

Status Engine::finish_transactional(const Ticket& ticket, const Completion* completion) {
  std::optional<Open> open = take_open(ticket);
  if (!open) return finish_ended(ticket, completion);
  SessionLease& s = open->session;
  if (completion == nullptr) {
    s->rollback();
    return {};
  }
  try {
    if (!s->finish_and_commit(ticket, finished_state(*completion), completion->result,
                              completion->ttl.count())) {
      return lease_lost();
    }
    return {};
  } catch (...) {
    Failure f = failure(s);
    const bool broken = s.discarded();
    s->rollback();
    // A connection lost while the COMMIT was on its way leaves the outcome unknown to this
    // process; the record and the handler's writes share it, so a retry either replays or runs.
    if (broken) {
      f = in_doubt(std::move(f),
                   "connection lost while committing; the transaction and the handler's writes "
                   "in it may or may not have committed (a retry replays the result if they "
                   "did): ");
    } else {
      f.message = "transaction did not commit; the handler's writes in it were rolled back: " +
                  f.describe();
    }
    std::lock_guard lock(open_mutex_);
    const auto now = std::chrono::steady_clock::now();
    forget_ended_before(now - kEndedKeptFor);
    ended_.push_back(Ended{std::string(ticket.key), ticket.fence, f, broken, now});
    return f;
  }
}

Status Engine::commit(const Ticket& ticket, const Completion& completion) {
  if (Status schema = ensure_schema(); !schema) return schema;
  if (mode_ == SqlMode::transactional) return finish_transactional(ticket, &completion);
  bool broken = false;
  try {
    SessionLease s = backend_->acquire(milliseconds{0});
    try {
      if (!s->finish(ticket, finished_state(completion), completion.result,
                     completion.ttl.count())) {
        return landed(*s, ticket, completion) ? Status{} : lease_lost();
      }
      return {};
    } catch (...) {
      Failure f = failure(s);
      // A session that broke under the finish (no reply) may have had it run; one the database
      // answered with an error did not.
      if (!s.discarded()) return f;
      return in_doubt(std::move(f),
                      "no reply to the commit; it may or may not have landed (a retry under "
                      "the same fence finds it if it did): ");
    }
  } catch (...) {
    return failure(broken);
  }
}

Status Engine::abort(const Ticket& ticket) {
  if (Status schema = ensure_schema(); !schema) return schema;
  if (mode_ == SqlMode::transactional) return finish_transactional(ticket, nullptr);
  return on_lent_session([&](Session& s) { return s.release(ticket) ? Status{} : lease_lost(); });
}

Status Engine::extend(const Ticket& ticket, std::chrono::milliseconds lease) {
  if (Status schema = ensure_schema(); !schema) return schema;
  if (mode_ == SqlMode::lease) {
    return on_lent_session(
        [&](Session& s) { return s.extend(ticket, lease.count()) ? Status{} : lease_lost(); });
  }
  // The holder's own session, in the holder's thread (Context::extend_lease).
  Session* session = nullptr;
  {
    std::lock_guard lock(open_mutex_);
    if (const auto it = find_open(ticket); it != open_.end()) {
      it->second.lease_until = std::chrono::steady_clock::now() + lease;
      session = it->second.session.get();
    }
  }
  if (session == nullptr) return lease_lost();
  try {
    return session->extend(ticket, lease.count()) ? Status{} : lease_lost();
  } catch (...) {
    bool broken = false;
    return failure(broken);
  }
}

Status Engine::rewind(const Ticket& ticket) {
  // Lease mode: the handler wrote nothing through the store, so there is nothing to undo.
  if (mode_ == SqlMode::lease) return {};
  Session* session = nullptr;
  Open* held = nullptr;
  {
    std::lock_guard lock(open_mutex_);
    const auto it = find_open(ticket);
    if (it == open_.end()) return lease_lost();
    held = &it->second;
    if (!held->marked) {
      throw std::logic_error(
          "idem: SqlStore::rewind needs a claim made with ClaimRequest::rewindable");
    }
    session = held->session.get();
  }
  try {
    session->rollback_to_mark();
    return {};
  } catch (...) {
    bool broken = false;
    Failure f = failure(broken);
    std::lock_guard lock(open_mutex_);
    if (broken) held->session.discard();  // dropped when the holder ends
    return f;
  }
}

Result<std::size_t> Engine::purge_expired(std::size_t max_rows) {
  if (Status schema = ensure_schema(); !schema) return schema.failure();
  if (max_rows == 0) return std::size_t{0};
  return on_lent_session([&](Session& s) -> Result<std::size_t> { return s.purge(max_rows); });
}

}  // namespace idem::sql
