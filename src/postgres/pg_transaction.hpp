#pragma once
// PgTransaction: the claim's transaction in two round trips, BEGIN sent with the first statement
// and COMMIT with the last, through the session's libpq connection; handlers see it as a
// pqxx::dbtransaction (a ManualTransaction, which sends nothing by itself).

#include <functional>
#include <string>

#include "postgres/pg_query.hpp"
#include "postgres/pqxx_compat.hpp"

namespace idem::postgres::detail {

class PgTransaction final {
 public:
  /// Sends a script (statements in one message) under the session's reply budget.
  using Script = std::function<Reply(const std::string&)>;

  /// `preamble`: settings sent first in the same message (they roll back with the transaction).
  PgTransaction(Connection& conn, std::string preamble, Script script);
  PgTransaction(const PgTransaction&) = delete;
  PgTransaction& operator=(const PgTransaction&) = delete;
  /// Rolls back what was sent and not committed (libpqxx may refuse to commit first).
  ~PgTransaction() { abort(); }

  pqxx::dbtransaction& handle() noexcept { return tx_; }

  bool begun() const noexcept { return begun_; }

  /// Sends `statement` right after BEGIN, in the same message as the transaction's first
  /// statement (at once if the transaction has begun).
  void send_first(const std::string& statement);

  /// Sends BEGIN and `statement` (may be empty) in one message; the statement's result.
  Reply open_with(const std::string& statement);

  /// Sends `statement` and COMMIT in one message. On failure the transaction is rolled back and
  /// the error rethrown.
  void commit_with(std::string statement);

  /// ROLLBACK if anything was sent; a failure to send it is left to the server (it rolls back a
  /// transaction whose connection ends).
  void abort() noexcept;

 private:
  void send_commit();

  Script script_;
  std::string begin_;
  std::string last_;
  bool begun_ = false;
  bool committed_ = false;
  ManualTransaction tx_;  // last: it ends while the rest is still there
};

}  // namespace idem::postgres::detail
