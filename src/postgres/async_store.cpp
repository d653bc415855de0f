// AsyncPostgresStore: the SQL record strategy's lease mode on one pipelined libpq connection,
// with PostgresStore's statements and their meaning.

#include "idem/postgres/async_store.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "idem/asio/detail/wake_op.hpp"
#include "idem/engine/record_model.hpp"
#include "postgres/pg_async_wait.hpp"
#include "postgres/pg_options.hpp"
#include "postgres/pg_pipeline.hpp"
#include "postgres/pg_schema.hpp"
#include "postgres/pg_values.hpp"
#include "postgres/pg_waker.hpp"
#include "sql/statements.hpp"

namespace idem {

namespace net = boost::asio;
using postgres::detail::Query;
using postgres::detail::Reply;
using std::chrono::milliseconds;

namespace {

constexpr const char* kClaim = "idem_async_claim";
constexpr const char* kFinish = "idem_async_finish";
constexpr const char* kRelease = "idem_async_release";
constexpr const char* kExtend = "idem_async_extend";
constexpr const char* kRead = "idem_async_read";
constexpr const char* kCountWaiter = "idem_async_count_waiter";

// A record may change between the claim's write and its read: ask again, as PostgresStore does.
constexpr int kClaimAttempts = 4;

Query prepared(const char* name, bool commit = false) {
  return {.kind = Query::prepared, .name = name, .commit = commit};
}
Query plain_sql(std::string sql) { return {.kind = Query::text, .sql = std::move(sql)}; }
Query preparation(const char* name, const std::string& sql) {
  return {.kind = Query::prepare, .name = name, .sql = sql};
}

Status lease_lost() {
  return Status(errc::lease_lost, "the record is no longer held under this fence");
}

// A record row as the record model reads it; nullopt, with `bad`, for one idem never writes.
std::optional<detail::RecordView<milliseconds>> view_of(const sql::ClaimRow& row, Failure& bad) {
  const std::optional<detail::RecordState> state = detail::from_sql(row.state);
  if (!state) {
    bad = make_failure(errc::record_corrupt,
                       row.state == sql::kMalformedState
                           ? std::string("SQL record has columns of other types than idem writes")
                           : "SQL record has unknown state " + std::to_string(row.state));
    return std::nullopt;
  }
  return detail::RecordView<milliseconds>{.state = *state,
                                          .fingerprint = row.fingerprint,
                                          .fence = row.fence,
                                          .lease_left = milliseconds{row.lease_left_ms},
                                          .expires_in = milliseconds{row.expire_left_ms},
                                          .result = row.result};
}
// The view points into the row: a temporary row would leave it dangling.
std::optional<detail::RecordView<milliseconds>> view_of(sql::ClaimRow&&, Failure&) = delete;

Query claim_query(const ClaimRequest& request) {
  Query q = prepared(kClaim);
  postgres::detail::add_claim(
      q, {.key = request.key,
          .fingerprint = request.fingerprint,
          .lease_ms = request.lease.count(),
          .keep_ms = held_retention(request.retention, request.lease).count()});
  return q;
}

Query finish_query(const Ticket& ticket, const Completion& completion) {
  Query q = prepared(kFinish, /*commit=*/true);
  postgres::detail::add_finish(q, ticket, detail::to_sql(detail::finished_state(completion.status)),
                               completion.result, completion.ttl.count());
  return q;
}

Query read_query(std::string_view key) {
  Query q = prepared(kRead);
  q.params.bytes(key);
  return q;
}

Query release_query(const Ticket& ticket) {
  Query q = prepared(kRelease);
  postgres::detail::add_ticket(q, ticket);
  return q;
}

// The waiter counts itself in the record while the hold it saw lives: the payload of the wake
// the hold's end will send (the wake triggers'), or nullopt when the hold is over already.
net::awaitable<std::optional<std::string>> count_waiter(
    std::shared_ptr<postgres::detail::PgPipeline> pipeline, std::string key, Fence fence) {
  Query q = prepared(kCountWaiter);
  postgres::detail::add_ticket(q, Ticket{key, fence});
  const Reply r = co_await pipeline->run(std::move(q));
  if (!r.ok() || r.row_count() != 1 || r.null(0, 0)) co_return std::nullopt;
  co_return std::string(r.text(0, 0));
}

Query extend_query(const Ticket& ticket, milliseconds lease) {
  Query q = prepared(kExtend);
  postgres::detail::add_ticket(q, ticket);
  q.params.number(lease.count());
  return q;
}

bool landed(const Reply& r, Fence fence, const Completion& completion) {
  Failure bad;
  const sql::ClaimRow row = postgres::detail::read_row(r, 0);
  const auto view = view_of(row, bad);
  return view && detail::check_fence(*view, fence, &completion) == detail::FenceCheck::landed;
}

}  // namespace

class AsyncPostgresStore::Impl {
 public:
  Impl(const net::any_io_executor& executor, const AsyncPostgresStoreOptions& options)
      : text_(sql::kPostgres, options.connection.table_prefix),
        statement_timeout_(options.connection.statement_timeout),
        executor_(executor) {
    postgres::detail::PipelineSettings s =
        postgres::detail::pipeline_settings(options.connection, "server");
    s.reconnect_backoff = options.reconnect_backoff;
    s.max_reconnect_backoff = options.max_reconnect_backoff;
    s.single_threaded = options.single_threaded;
    // The listener's connection is one of its own, never the pipeline's (a LISTEN there would
    // hold every NOTIFY up behind the calls in flight): a PgWaker, as PostgresStore's.
    waker_ = std::make_shared<postgres::detail::PgWaker>(s.conninfo, s.connect_budget,
                                                         text_.wake_channel);
    pipeline_ = std::make_shared<postgres::detail::PgPipeline>(
        executor, std::move(s), [this](postgres::detail::PgPipeline& p) { set_up(p); });
  }

  postgres::detail::PgPipeline& pipeline() { return *pipeline_; }

  // Waits for the end of the hold of `key` under `fence` until `deadline`: listening first on
  // the store's listener, then counting itself in (on the pipeline), then for the wake.
  void await_change(const std::shared_ptr<detail::WaitCompletion>& done, std::string key,
                    Fence fence, std::chrono::steady_clock::time_point deadline) {
    postgres::detail::start_wait(
        executor_, waker_,
        [pipeline = pipeline_, key = std::move(key), fence] {
          return count_waiter(pipeline, key, fence);
        },
        deadline, done);
  }

  // Ends the listener and every wait on it (the store's destructor).
  void stop_waking() { waker_->stop(); }

 private:
  void set_up(postgres::detail::PgPipeline& p) {
    const std::uint64_t g = p.generation();
    p.send_internal(
        plain_sql(fmt::format("SET statement_timeout = {}", statement_timeout_.count())),
        [](Reply&) {});
    p.send_internal(plain_sql(postgres::detail::schema_probe(text_)), [this, &p, g](Reply& r) {
      if (!p.current(g)) return;
      if (!r.ok() || r.row_count() != 1 || r.column_count() != 3) {
        p.drop("schema check failed: " + r.failure.message);
        return;
      }
      const Reply::Row row = r.row(0);
      if (row[1] == "on") {
        p.drop(
            "the server is read-only (a hot standby, or default_transaction_read_only "
            "is on): claims and commits need the primary");
        return;
      }
      const bool tables = row[0] == "t";
      if (tables && row[2] == "t") {
        check_version(p, g);
      } else {
        create_schema(p, g, tables);
      }
    });
  }

  // Creates what is missing, or upgrades an earlier version (`tables` there), as PostgresStore
  // does, then checks the version again, this time without upgrading.
  void create_schema(postgres::detail::PgPipeline& p, std::uint64_t g, bool tables) {
    auto first_error = std::make_shared<std::string>();
    auto step = [&p, first_error](std::string sql) {
      p.send_internal(plain_sql(std::move(sql)), [first_error](Reply& r) {
        if (!r.ok() && first_error->empty()) *first_error = r.failure.message;
      });
    };
    step("BEGIN");
    step(postgres::detail::kSchemaLock);
    for (std::string& ddl : postgres::detail::schema_ddl(text_, tables)) step(std::move(ddl));
    p.send_internal(plain_sql("COMMIT"), [this, &p, g, first_error](Reply& r) {
      if (!p.current(g)) return;
      if (!r.ok() || !first_error->empty()) {
        p.drop("cannot create the tables: " +
               (first_error->empty() ? r.failure.message : *first_error));
        return;
      }
      check_version(p, g, /*may_upgrade=*/false);
    });
  }

  void check_version(postgres::detail::PgPipeline& p, std::uint64_t g, bool may_upgrade = true) {
    p.send_internal(plain_sql(text_.select_version), [this, &p, g, may_upgrade](Reply& r) {
      if (!p.current(g)) return;
      std::int64_t version = -1;
      if (!r.ok() || r.row_count() != 1 || !r.integer(0, 0, version)) {
        p.drop("cannot read the schema version: " + r.failure.message);
        return;
      }
      if (may_upgrade && version >= 1 && version < text_.version) {
        create_schema(p, g, /*tables=*/true);
        return;
      }
      if (version != text_.version) {
        p.drop(fmt::format("table {} says schema version {}, this library knows {}", text_.schema,
                           version, text_.version));
        return;
      }
      for (const auto& [name, sql] :
           {std::pair{kClaim, &text_.claim_in_one}, std::pair{kFinish, &text_.finish},
            std::pair{kRelease, &text_.release}, std::pair{kExtend, &text_.extend},
            std::pair{kRead, &text_.read}, std::pair{kCountWaiter, &text_.count_waiter}}) {
        p.send_internal(preparation(name, *sql), [&p, g](Reply& prepared) {
          if (p.current(g) && !prepared.ok()) {
            p.drop("cannot prepare a statement: " + prepared.failure.message);
          }
        });
      }
      p.open();
    });
  }

  sql::Statements text_;
  milliseconds statement_timeout_;
  net::any_io_executor executor_;
  std::shared_ptr<postgres::detail::PgWaker> waker_;  // listens from the first wait
  std::shared_ptr<postgres::detail::PgPipeline> pipeline_;
};

namespace {

AsyncPostgresStoreOptions checked(AsyncPostgresStoreOptions options) {
  postgres::detail::check(options.connection, "AsyncPostgresStore", "connection.");
  return options;
}

}  // namespace

AsyncPostgresStore::AsyncPostgresStore(const net::any_io_executor& executor,
                                       AsyncPostgresStoreOptions options)
    : impl_(std::make_shared<Impl>(executor, checked(std::move(options)))) {}

AsyncPostgresStore::~AsyncPostgresStore() {
  try {
    impl_->stop_waking();
    impl_->pipeline().close();
  } catch (...) {  // out of memory for the message: the connection closes with the pipeline
  }
}

std::uint64_t AsyncPostgresStore::connections_opened() const noexcept {
  return impl_->pipeline().connections_opened();
}

namespace {

// The claim's answer, read where the reply is (claim_in_one's row); nullopt: the record changed
// under the statement: ask again.
struct ClaimAnswer {
  Fingerprint fingerprint;

  std::optional<Result<Claim>> operator()(const Reply& r, const Query&) const {
    if (!r.ok()) return Result<Claim>(r.failure);
    if (r.row_count() == 0) return std::nullopt;
    const sql::ClaimRow row = postgres::detail::claim_row(r, 0, 0);
    if (row.acquired) {
      return Result<Claim>(
          Claim{.status = ClaimStatus::acquired, .fence = row.fence, .took_over = row.took_over});
    }
    Failure bad;
    const auto view = view_of(row, bad);
    if (!view) return Result<Claim>(std::move(bad));
    Claim answer = detail::classify(*view, fingerprint);
    // The statement takes every record a claim may take: finding one means it changed.
    if (answer.status == ClaimStatus::acquired) return std::nullopt;
    return Result<Claim>(std::move(answer));
  }
  static Result<Claim> exhausted() {
    return make_failure(errc::in_progress, "the record kept changing under the claim; retry");
  }
};

// The fenced finish's answer; when it matched nothing, the read's (a retry finds its landed
// commit). The ticket and completion are the caller's, alive until the call completes.
struct CommitAnswer {
  const Ticket* ticket;
  const Completion* completion;

  std::optional<Status> operator()(const Reply& r, Query& query) const {
    if (!r.ok()) return Status(r.failure);
    if (query.name == kFinish) {
      if (r.affected == 1) return Status{};
      query = read_query(ticket->key);  // matched nothing: read the record
      return std::nullopt;
    }
    if (r.row_count() == 0) return lease_lost();
    return landed(r, ticket->fence, *completion) ? Status{} : lease_lost();
  }
  static Status exhausted() { return lease_lost(); }
};

net::awaitable<Result<Claim>> refused_at_once(Failure failure) { co_return failure; }

}  // namespace

// The calls' parameters are views of what the caller keeps until the call completes (the
// AsyncStore contract).
net::awaitable<Result<Claim>> AsyncPostgresStore::async_claim(const ClaimRequest& request) {
  if (request.key.empty()) {
    return refused_at_once(make_failure(errc::key_invalid, "effective key is empty"));
  }
  return impl_->pipeline().run_decoded<Result<Claim>>(
      claim_query(request), ClaimAnswer{request.fingerprint}, kClaimAttempts);
}

net::awaitable<Status> AsyncPostgresStore::async_commit(const Ticket& ticket,
                                                        const Completion& completion) {
  return impl_->pipeline().run_decoded<Status>(finish_query(ticket, completion),
                                               CommitAnswer{&ticket, &completion}, 2);
}

net::awaitable<Status> AsyncPostgresStore::async_abort(const Ticket& ticket) {
  const std::shared_ptr<Impl> impl = impl_;
  Reply r = co_await impl->pipeline().run(release_query(ticket));
  if (!r.ok()) co_return r.failure;
  co_return r.affected == 1 ? Status{} : lease_lost();
}

bool AsyncPostgresStore::wakes() const noexcept { return true; }

net::awaitable<bool> AsyncPostgresStore::async_await_change(const Ticket& held,
                                                            std::chrono::milliseconds bound) {
  if (bound.count() <= 0) {
    return detail::async_wait_with(
        [](const std::shared_ptr<detail::WaitCompletion>& done) { done->complete(true); });
  }
  const auto deadline = std::chrono::steady_clock::now() + bound;
  return detail::async_wait_with([impl = impl_, key = std::string(held.key), fence = held.fence,
                                  deadline](const std::shared_ptr<detail::WaitCompletion>& done) {
    impl->await_change(done, key, fence, deadline);
  });
}

net::awaitable<Status> AsyncPostgresStore::async_extend(const Ticket& ticket,
                                                        std::chrono::milliseconds lease) {
  const std::shared_ptr<Impl> impl = impl_;
  Reply r = co_await impl->pipeline().run(extend_query(ticket, lease));
  if (!r.ok()) co_return r.failure;
  co_return r.affected == 1 ? Status{} : lease_lost();
}

}  // namespace idem
