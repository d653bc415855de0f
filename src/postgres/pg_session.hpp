#pragma once
// PgSession: one PostgreSQL connection (PgLink) in one thread's hands, its statements prepared
// at first use. The store's round trips run under a reply deadline; a handler's own statements,
// through libpqxx on the same connection, are bounded by statement_timeout and TCP
// (tcp_user_timeout, keepalives).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "idem/postgres/transaction.hpp"
#include "postgres/pg_link.hpp"
#include "postgres/pg_options.hpp"
#include "postgres/pg_transaction.hpp"
#include "postgres/pqxx_compat.hpp"
#include "sql/engine.hpp"
#include "sql/statements.hpp"

namespace idem::postgres::detail {

enum class Role : std::uint8_t { primary, replica };  // a replica session only reads records

class PgSession final : public sql::Session {
 public:
  /// Connects (within `connect_budget`), sets the statement timeout and declares the role's
  /// statements; a replica's schema version is checked here (UnusableServer).
  PgSession(const std::string& conninfo, std::chrono::milliseconds connect_budget,
            const sql::Statements& text, std::chrono::milliseconds statement_timeout, Role role);
  PgSession(const PgSession&) = delete;
  PgSession& operator=(const PgSession&) = delete;
  ~PgSession() override;

  bool looks_alive() const noexcept { return link_.looks_alive(); }
  bool is_open() const noexcept { return link_.is_open(); }

  /// Creates the tables if absent and checks the schema version.
  void create_schema(const sql::Statements& text);

  std::optional<sql::ClaimRow> claim(const sql::ClaimArgs& args) override;
  std::optional<sql::ClaimRow> read(std::string_view key) override;
  bool finish(const Ticket& ticket, sql::State state, std::string_view result,
              std::int64_t ttl_ms) override;
  bool release(const Ticket& ticket) override;
  bool extend(const Ticket& ticket, std::int64_t lease_ms) override;
  std::size_t purge(std::size_t max_rows) override;
  Written write_many(std::span<const sql::FinishArgs> finishes,
                     std::span<const sql::ClaimArgs> claims) override;
  void begin(std::chrono::milliseconds block_for) override;
  void hold(std::string_view table, std::string_view key) override;
  void commit() override;
  bool finish_and_commit(const Ticket& ticket, sql::State state, std::string_view result,
                         std::int64_t ttl_ms) override;
  void rollback() noexcept override;
  void mark() override;
  void rollback_to_mark() override;
  void step_savepoint() override;
  void end_step(bool keep) override;
  NativeTransaction native() noexcept override {
    if (!work_) return {};
    transaction_.transaction = &work_->handle();
    return NativeTransaction(transaction_);
  }
  std::int64_t run(const std::string& sql, std::span<const sql::Param> params) override;
  bool first_row(const std::string& sql, std::span<const sql::Param> params, sql::Row& row,
                 unsigned blob_columns) override;
  std::vector<sql::Row> rows(const std::string& sql, std::span<const sql::Param> params,
                             unsigned blob_columns) override;
  std::int64_t server_process() const noexcept override { return server_process_; }
  bool transaction_ended(std::int64_t process) override;

 private:
  Written write_many_once(std::span<const sql::FinishArgs> finishes,
                          std::span<const sql::ClaimArgs> claims);
  void declare_batches(const sql::Statements& text);

  // One round trip under a reply deadline of `statements` statement limits plus kReplyMargin.
  Reply call(const Query& query, int statements = 1) {
    return link_.run(query, statement_limit() * statements + kReplyMargin);
  }
  Reply script(const std::string& sql) { return call(Query{.kind = Query::script, .sql = sql}); }
  // A statement of the store, inside the claim's transaction if one is open.
  Reply send(const Query& query);
  // A generic statement, prepared on first use; parameters as text, one list for every kind.
  Reply generic(const std::string& sql, std::span<const sql::Param> params);
  void declare(const std::string& name, std::string text);
  // The store's statement `name`, prepared on the server the first time.
  Query prepared(const std::string& name);

  // The longest statement timeout ever sent: the server enforces at most this on a statement.
  std::chrono::milliseconds statement_limit() const noexcept {
    return std::max(statement_timeout_, limit_sent_);
  }

  // EXECUTE as SQL text, for a message that carries other statements too; the parameters
  // quoted as literals of unknown type, read as text parameters are.
  std::string execute(const std::string& name, const std::vector<std::string>& values);

  void set_timeouts(std::chrono::milliseconds statement, std::chrono::milliseconds lock);
  // The settings in force are unknown: the next transaction sends them again.
  void forget_timeouts() noexcept {
    current_statement_ = std::chrono::milliseconds{-1};
    current_lock_ = std::chrono::milliseconds{-1};
  }

  PgLink link_;
  std::int64_t server_process_ = 0;  // the backend's process ID, from the connection's start
  std::optional<AdoptedConnection> handlers_;  // libpqxx on link_, from the first transaction
  std::string records_;  // the records table: the space of hold()'s key in a claim
  std::chrono::milliseconds statement_timeout_;
  std::chrono::milliseconds limit_sent_{0};
  std::chrono::milliseconds current_statement_{-1};
  std::chrono::milliseconds current_lock_{-1};
  std::unique_ptr<PgTransaction> work_;
  idem::detail::PgTransactionHandle transaction_;  // what handlers get: work_'s transaction
  struct Statement {
    std::string text;
    bool prepared = false;  // on the server
  };
  std::unordered_map<std::string, Statement> statements_;  // by name
  std::unordered_map<std::string, std::string> generic_;   // statement text -> name
};

}  // namespace idem::postgres::detail
