// The entity stores on SQL, written once for both dialects; the steps of a claim, commit and
// rewind: docs/version_and_state.md#what-happens-step-by-step-sql.

#include "sql/entity_engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include "idem/engine/record_model.hpp"
#include "postgres/pg_schema.hpp"

namespace idem::detail {

using std::chrono::milliseconds;

struct SqlEntities::Impl {
  std::unique_ptr<sql::Backend> backend;
  const sql::Dialect* dialect = nullptr;
  EntityKind kind = EntityKind::version;
  EntityTable table;
  std::string ops;     // op-log table name
  std::string fences;  // PostgreSQL: the sequence op-log fences are drawn from

  std::string lookup, insert_op, finish_op, bump, read, read_op;  // from checked identifiers
  std::string transition_head;  // "UPDATE t SET c = ?2 WHERE id = ?1 AND c IN (" + markers

  std::mutex mutex;
  bool schema_ready = false;
  struct Open {
    sql::SessionLease session;
    std::string op_key;
    bool marked = false;  // a rewindable claim: rewind() goes back to the mark after the op row
  };
  std::map<std::pair<std::string, Fence>, Open, std::less<>> open;
  // Transactions whose commit failed: a retry hears the same failure, not a lease_lost no
  // takeover caused. Kept by age, so that each retry in an outage finds its own.
  struct Ended {
    std::string op_key;
    Fence fence = 0;
    Failure failure;
    std::chrono::steady_clock::time_point at;
    bool in_doubt = false;     // the COMMIT went out and no answer came back
    std::int64_t process = 0;  // the server process that was sent the COMMIT (0: none)
  };
  static constexpr std::chrono::minutes kEndedKeptFor{5};
  std::deque<Ended> ended;  // under mutex, oldest first

  void forget_ended_before(std::chrono::steady_clock::time_point t) {
    while (!ended.empty() && ended.front().at < t) ended.pop_front();
  }

  std::string p(int i) const { return fmt::format("{}{}", dialect->param, i); }

  void build() {
    const sql::Dialect& d = *dialect;
    // One row: 0 and the op-log row, or, when there is none, a new fence (CASE draws only
    // then). Run only once the claim holds the operation's key.
    lookup = fmt::format(
        "SELECT CASE WHEN o.key IS NULL THEN {} ELSE 0 END, o.state, o.fp_hi, o.fp_lo, o.fence, "
        "o.result FROM (SELECT 1) AS one LEFT JOIN {} AS o ON o.key = {}",
        fmt::format(fmt::runtime(d.next_fence), fences), ops, p(1));
    const int held = static_cast<int>(SqlState::held);
    insert_op = fmt::format(
        "INSERT INTO {} (key, entity, fence, state, fp_hi, fp_lo, produced, result, created_ms) "
        "VALUES ({}, {}, {}, {}, {}, {}, {}, NULL, {}) ON CONFLICT (key) DO NOTHING",
        ops, p(1), p(2), p(3), held, p(4), p(5), p(6), d.now_ms);
    // Read after a commit lost its answer: on PostgreSQL, FOR SHARE waits for the broken
    // connection's transaction (which holds the row from its claim) to end, so a COMMIT that
    // reached the server is seen, not read past while its backend has yet to finish it.
    read_op = fmt::format("SELECT state, fence, result FROM {} WHERE key = {}{}", ops, p(1),
                          &d == &sql::kPostgres ? " FOR SHARE" : "");
    finish_op = fmt::format(
        "UPDATE {} SET state = {}, result = {} WHERE key = {} AND fence = {} AND state = {}", ops,
        p(3), p(4), p(1), p(2), held);
    bump = fmt::format("UPDATE {0} SET {2} = {2} + 1 WHERE {1} = {3} AND {2} = {4}", table.table,
                       table.id_column, table.column, p(1), p(2));
    transition_head = fmt::format("UPDATE {0} SET {2} = {3} WHERE {1} = {4} AND {2} IN (",
                                  table.table, table.id_column, table.column, p(2), p(1));
    read = fmt::format("SELECT {} FROM {} WHERE {} = {}", table.column, table.table,
                       table.id_column, p(1));
  }

  std::string transition(std::size_t from_count) const {
    std::string sql = transition_head;
    for (std::size_t i = 0; i < from_count; ++i) {
      if (i > 0) sql += ", ";
      sql += p(static_cast<int>(i) + 3);
    }
    return sql + ")";
  }

  Failure failure(bool& broken, bool claim) const noexcept {
    return backend->failure(std::current_exception(), broken, claim);
  }

  Result<sql::SessionLease> session_now() const {
    try {
      return backend->acquire(milliseconds{0});
    } catch (...) {
      bool broken = false;
      return failure(broken, false);
    }
  }

  // A claim that failed to get its turn: in_progress when a holder here has the operation,
  // else `f` (SQLite: the file stayed locked by another operation's holder).
  Result<CasAnswer> busy(std::string_view op_key, Failure f) {
    if (f.code != errc::in_progress) {
      std::lock_guard lock(mutex);
      for (const auto& [held, o] : open) {
        if (held.first == op_key) {
          return CasAnswer::of(Claim{.status = ClaimStatus::in_progress, .fence = held.second});
        }
      }
    }
    return f;
  }
};

namespace {

sql::Param text(std::string_view s) { return {sql::Param::text, 0, s}; }
sql::Param bytes(std::string_view s) { return {sql::Param::bytes, 0, s}; }
sql::Param integer(std::int64_t n) { return {sql::Param::integer, n, {}}; }

// A lent session whose transaction rolls back when it ends, unless the holder keeps it.
class Checkout {
 public:
  explicit Checkout(sql::SessionLease lease) noexcept : lease_(std::move(lease)) {}
  Checkout(const Checkout&) = delete;
  Checkout& operator=(const Checkout&) = delete;
  ~Checkout() {
    if (!lease_) return;
    lease_->rollback();
    if (broken) lease_.discard();
  }
  sql::Session* operator->() const noexcept { return lease_.get(); }
  sql::Session& operator*() const noexcept { return *lease_; }
  sql::SessionLease keep() noexcept { return std::move(lease_); }
  bool broken = false;

 private:
  sql::SessionLease lease_;
};

constexpr int kClaimAttempts = 4;

Status lease_lost() {
  return Status(errc::lease_lost, "the entity operation is no longer held under this fence");
}

std::int64_t as_i64(std::uint64_t v) { return std::bit_cast<std::int64_t>(v); }
std::uint64_t as_u64(std::int64_t v) { return std::bit_cast<std::uint64_t>(v); }

std::optional<std::int64_t> integer_column(const std::optional<std::string>& cell) {
  if (!cell) return std::nullopt;
  std::int64_t v = 0;
  const char* end = cell->data() + cell->size();
  const auto [at, ec] = std::from_chars(cell->data(), end, v);
  if (ec != std::errc{} || at != end || cell->empty()) return std::nullopt;
  return v;
}
}  // namespace

Result<CasAnswer> stored_operation(const sql::Row& row, const Fingerprint& fingerprint) {
  auto corrupt = [](const char* why) {
    return make_failure(errc::record_corrupt, std::string("entity op-log row: ") + why);
  };
  if (row.size() != 5) return corrupt("unexpected column count");
  const auto state = integer_column(row[0]);
  const auto fp_hi = integer_column(row[1]);
  const auto fp_lo = integer_column(row[2]);
  const auto fence = integer_column(row[3]);
  if (!state || !fp_hi || !fp_lo || !fence) {
    return corrupt("a state, fingerprint or fence is not an integer");
  }
  const std::optional<RecordState> decoded = from_sql(*state);
  if (!decoded || *decoded == RecordState::released) return corrupt("unknown state");
  if (*fence <= 0) return corrupt("no fence");
  // No lease runs out (the holder's transaction keeps the row) and nothing expires.
  const RecordView<milliseconds> view{.state = *decoded,
                                      .fingerprint = {as_u64(*fp_hi), as_u64(*fp_lo)},
                                      .fence = static_cast<Fence>(*fence),
                                      .result = row[4] ? std::string_view(*row[4]) : ""};
  return CasAnswer::of(classify(view, fingerprint));
}

SqlEntities::SqlEntities(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SqlEntities::SqlEntities(SqlEntities&&) noexcept = default;
SqlEntities& SqlEntities::operator=(SqlEntities&&) noexcept = default;
SqlEntities::~SqlEntities() {
  if (!impl_) return;
  for (auto& [key, open] : impl_->open) open.session->rollback();
}

const std::string& SqlEntities::op_log_table() const noexcept { return impl_->ops; }

StoreStats SqlEntities::stats() const noexcept {
  return StoreStats{.store = impl_->backend->store_name(), .pool = impl_->backend->pool_stats()};
}

Status SqlEntities::ensure_schema() {
  Impl& m = *impl_;
  {
    std::lock_guard lock(m.mutex);
    if (m.schema_ready) return {};
  }
  Result<sql::SessionLease> session = m.session_now();
  if (!session) return session.failure();
  Checkout s(std::move(session).value());
  const bool postgres = std::string_view(m.dialect->name) == "postgres";
  try {
    // A read first, which waits for no writer (such as a running handler holding the lock).
    sql::Row found;
    const std::array<sql::Param, 2> names{text(m.ops), text(m.fences)};
    const bool present =
        postgres
            ? s->first_row("SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL",
                           names, found, 0) &&
                  found.size() == 1 && found[0] == "t"
            : s->first_row("SELECT count(*) FROM sqlite_master WHERE name = ?1",
                           std::span(names).first(1), found, 0) &&
                  found.size() == 1 && found[0] == "1";
    if (!present) {
      // SQLite: the write lock, waited for as long as the store's busy_timeout.
      s->begin(postgres ? milliseconds{10'000} : milliseconds{0});
      // CREATE IF NOT EXISTS can still collide between processes: the record stores' lock.
      if (postgres) (void)s->first_row(postgres::detail::kSchemaLock, {}, found, 0);
      for (const std::string& ddl : m.backend->statements().create_entity_ops) s->run(ddl, {});
      s->commit();
    }
  } catch (...) {
    return m.failure(s.broken, false);
  }
  std::lock_guard lock(m.mutex);
  m.schema_ready = true;
  return {};
}

Result<CasAnswer> SqlEntities::claim(const CasRequest& r) {
  Impl& m = *impl_;
  if (Status schema = ensure_schema(); !schema) return schema.failure();
  sql::SessionLease session;
  try {
    session = m.backend->acquire(r.block_for);
  } catch (...) {
    bool broken = false;
    return m.busy(r.op_key, m.failure(broken, true));
  }
  Checkout s(std::move(session));
  std::string update;
  std::array<sql::Param, 2> bump_params{text(r.entity), integer(as_i64(r.expected_version))};
  std::vector<sql::Param> move_params;
  if (m.kind == EntityKind::version) {
    update = m.bump;
  } else {
    update = m.transition(r.from.size());
    move_params.reserve(2 + r.from.size());
    move_params.push_back(text(r.entity));
    move_params.push_back(text(r.to));
    for (const std::string& f : r.from) move_params.push_back(text(f));
  }
  const std::span<const sql::Param> update_params = m.kind == EntityKind::version
                                                        ? std::span<const sql::Param>(bump_params)
                                                        : std::span<const sql::Param>(move_params);
  const std::string produced =
      m.kind == EntityKind::version ? std::to_string(r.expected_version + 1) : std::string(r.to);
  const std::array<sql::Param, 1> key_param{bytes(r.op_key)};
  try {
    sql::Row row;
    for (int attempt = 0; attempt < kClaimAttempts; ++attempt) {
      s->begin(r.block_for);
      // A second claimer of the same operation waits here until this transaction ends.
      s->hold(m.ops, r.op_key);
      if (!s->first_row(m.lookup, key_param, row, 1u << 5) || row.size() != 6) {
        return make_failure(errc::store_unavailable, "idem: the op-log lookup returned no row");
      }
      const std::optional<std::int64_t> drawn = integer_column(row[0]);
      if (drawn == 0) return stored_operation(sql::Row(row.begin() + 1, row.end()), r.fingerprint);
      if (!drawn || *drawn < 0) {
        return make_failure(errc::store_unavailable, "idem: the fence source gave no fence");
      }
      const auto fence = static_cast<Fence>(*drawn);
      // The op-log row first: a rewind to the mark below keeps it.
      const std::array<sql::Param, 6> insert{bytes(r.op_key),
                                             text(r.entity),
                                             integer(*drawn),
                                             integer(as_i64(r.fingerprint.high)),
                                             integer(as_i64(r.fingerprint.low)),
                                             text(produced)};
      if (s->run(m.insert_op, insert) != 1) {
        s->rollback();  // the same operation committed meanwhile: look again
        continue;
      }
      if (r.rewindable) s->mark();
      if (s->run(update, update_params) == 1) {
        const NativeTransaction native = s->native();
        {
          std::lock_guard lock(m.mutex);
          m.open.emplace(std::pair{std::string(r.op_key), fence},
                         Impl::Open{s.keep(), std::string(r.op_key), r.rewindable});
        }
        return CasAnswer::of(
            Claim{.status = ClaimStatus::acquired, .fence = fence, .transaction = native});
      }
      const std::array<sql::Param, 1> entity_param{text(r.entity)};
      if (!s->first_row(m.read, entity_param, row, 0)) {
        return CasAnswer::refused(CasAnswer::Refusal::missing);
      }
      return CasAnswer::refused(CasAnswer::Refusal::conflict,
                                row.empty() ? std::string() : row[0].value_or("NULL"));
    }
  } catch (...) {
    return m.busy(r.op_key, m.failure(s.broken, true));
  }
  return make_failure(errc::in_progress, "the operation kept changing under the claim; retry");
}

namespace {

// How long a commit in doubt waits for the server process it sent COMMIT to to end that
// transaction. One whose client connection is gone ends it as soon as it reads what is left:
// the COMMIT, or the connection's end.
constexpr milliseconds kSettleBound{5000};

// Whether server process `process` has ended the transaction it was sent COMMIT in, asked on
// `s` until kSettleBound: until then, a COMMIT still on its way could land after the op log
// was read, and its absence would prove nothing.
bool transaction_settled(sql::Session& s, std::int64_t process) {
  if (process == 0) return true;
  const auto until = std::chrono::steady_clock::now() + kSettleBound;
  for (milliseconds pause{2};; pause = std::min(pause * 2, milliseconds{50})) {
    if (s.transaction_ended(process)) return true;
    if (std::chrono::steady_clock::now() + pause > until) return false;
    std::this_thread::sleep_for(pause);
  }
}

// Whether the op log holds `completion` under `fence` (a commit whose answer was lost finds its
// own), once `process`'s transaction has ended; nullopt when that cannot be known.
std::optional<bool> op_landed(SqlEntities::Impl& m, const std::string& op_key, Fence fence,
                              const Completion& completion, std::int64_t process) {
  try {
    Checkout s(m.backend->acquire(milliseconds{0}));
    try {
      if (!transaction_settled(*s, process)) return std::nullopt;
      sql::Row row;
      const std::array<sql::Param, 1> key{bytes(op_key)};
      if (!s->first_row(m.read_op, key, row, 1u << 2)) return false;
      return row.size() == 3 &&
             integer_column(row[0]) ==
                 static_cast<std::int64_t>(to_sql(finished_state(completion.status))) &&
             integer_column(row[1]) == static_cast<std::int64_t>(fence) &&
             row[2].value_or(std::string()) == completion.result;
    } catch (...) {
      (void)m.failure(s.broken, false);
      return std::nullopt;
    }
  } catch (...) {
    return std::nullopt;
  }
}

// A commit that broke once its COMMIT went out: the op log says how it ended, or outcome_unknown.
Status commit_in_doubt(SqlEntities::Impl& m, const std::string& op_key, Fence fence,
                       const Completion& completion, std::int64_t process, Failure f) {
  const std::optional<bool> landed = op_landed(m, op_key, fence, completion, process);
  if (landed == true) return {};
  if (landed == false) {
    f.message =
        "the connection was lost while committing and the operation is not in the op log: the "
        "entity change and the handler's writes were rolled back: " +
        f.describe();
    return f;
  }
  f.code = make_error_code(errc::outcome_unknown);
  f.message =
      "connection lost while committing, and the op log could not be read once the server had "
      "ended the transaction; the entity change "
      "and the handler's writes in it may or may not have committed (a retry replays the "
      "result if they did): " +
      f.describe();
  return f;
}

// `done` sets `committing` just before it sends COMMIT: a break from there on leaves the outcome
// unknown until the op log is read. `completion`: null for an abort.
template <class Done>
Status finish(SqlEntities::Impl& m, const Ticket& ticket, const Completion* completion,
              Done&& done) {
  std::optional<SqlEntities::Impl::Open> open;
  std::optional<SqlEntities::Impl::Ended> ended;
  {
    std::lock_guard lock(m.mutex);
    auto it = m.open.find(std::pair{std::string(ticket.key), ticket.fence});
    if (it == m.open.end()) {
      m.forget_ended_before(std::chrono::steady_clock::now() - m.kEndedKeptFor);
      for (const SqlEntities::Impl::Ended& e : m.ended) {
        if (e.fence == ticket.fence && e.op_key == ticket.key) ended = e;
      }
      if (!ended) return lease_lost();
    } else {
      open = std::move(it->second);
      m.open.erase(it);
    }
  }
  if (ended) {
    // A retry of a commit still in doubt: the op log may be readable now.
    if (!ended->in_doubt || completion == nullptr) return ended->failure;
    return commit_in_doubt(m, ended->op_key, ticket.fence, *completion, ended->process,
                           ended->failure);
  }
  Checkout s(std::move(open->session));
  const std::int64_t process = s->server_process();
  bool committing = false;
  try {
    return done(s, open->op_key, committing);
  } catch (...) {
    Failure f = m.failure(s.broken, false);
    const bool in_doubt = s.broken && committing && completion != nullptr;
    Status answer;
    if (in_doubt) {
      answer = commit_in_doubt(m, open->op_key, ticket.fence, *completion, process, f);
    } else {
      f.message =
          "transaction did not commit; the entity change and the handler's writes in it were "
          "rolled back: " +
          f.describe();
      answer = f;
    }
    if (answer.ok()) return answer;
    std::lock_guard lock(m.mutex);
    const auto now = std::chrono::steady_clock::now();
    m.forget_ended_before(now - m.kEndedKeptFor);
    m.ended.push_back(SqlEntities::Impl::Ended{open->op_key, ticket.fence, answer.failure(), now,
                                               answer.error() == errc::outcome_unknown, process});
    return answer;
  }
}

}  // namespace

Status SqlEntities::commit(const Ticket& ticket, const Completion& completion) {
  Impl& m = *impl_;
  return finish(m, ticket, &completion,
                [&](Checkout& s, const std::string& op_key, bool& committing) -> Status {
                  const SqlState state = to_sql(finished_state(completion.status));
                  const std::array<sql::Param, 4> args{
                      bytes(op_key), integer(static_cast<std::int64_t>(ticket.fence)),
                      integer(static_cast<std::int64_t>(state)), bytes(completion.result)};
                  if (s->run(m.finish_op, args) != 1) return lease_lost();
                  committing = true;
                  s->commit();
                  return {};
                });
}

Status SqlEntities::abort(const Ticket& ticket) {
  return finish(*impl_, ticket, nullptr, [](Checkout& s, const std::string&, bool&) -> Status {
    s->rollback();
    return {};
  });
}

Status SqlEntities::rewind(const Ticket& ticket) {
  Impl& m = *impl_;
  sql::Session* session = nullptr;
  {
    std::lock_guard lock(m.mutex);
    auto it = m.open.find(std::pair{std::string(ticket.key), ticket.fence});
    if (it == m.open.end()) return lease_lost();
    if (!it->second.marked) {
      throw std::logic_error(
          "idem: an entity store's rewind needs a claim made with ClaimRequest::rewindable");
    }
    session = it->second.session.get();
  }
  // The holder's own session, in its thread; the op-log row stays, held, for the failure.
  try {
    session->rollback_to_mark();
    return {};
  } catch (...) {
    bool broken = false;
    return m.failure(broken, false);
  }
}

Status SqlEntities::extend(const Ticket& ticket, std::chrono::milliseconds) {
  // The holder's transaction keeps the row locked until it ends: there is no lease to renew.
  std::lock_guard lock(impl_->mutex);
  if (impl_->open.count(std::pair{std::string(ticket.key), ticket.fence}) == 0) {
    return lease_lost();
  }
  return {};
}

Result<std::string> SqlEntities::current(std::string_view entity) {
  Impl& m = *impl_;
  Result<sql::SessionLease> session = m.session_now();
  if (!session) return session.failure();
  Checkout s(std::move(session).value());
  try {
    sql::Row row;
    const std::array<sql::Param, 1> args{text(entity)};
    if (!s->first_row(m.read, args, row, 0)) {
      return make_failure(errc::key_invalid,
                          "no entity '" + std::string(entity) + "' in " + m.table.table);
    }
    return row.empty() ? std::string() : row[0].value_or("NULL");
  } catch (...) {
    return m.failure(s.broken, false);
  }
}

}  // namespace idem::detail

namespace idem::sql {

detail::SqlEntities make_entities(std::unique_ptr<Backend> backend, const Dialect& dialect,
                                  detail::EntityKind kind, const EntityTable& table,
                                  const std::string& op_log_prefix) {
  detail::check_table(table);
  if (!valid_prefix(op_log_prefix)) {
    throw std::invalid_argument("idem: table_prefix '" + op_log_prefix +
                                "' must be letters, digits and '_' (not starting with a digit)");
  }
  auto impl = std::make_unique<detail::SqlEntities::Impl>();
  impl->backend = std::move(backend);
  impl->dialect = &dialect;
  impl->kind = kind;
  impl->table = table;
  impl->ops = impl->backend->statements().entity_ops;
  impl->fences = impl->backend->statements().entity_fences;
  impl->build();
  return detail::SqlEntities(std::move(impl));
}

}  // namespace idem::sql
