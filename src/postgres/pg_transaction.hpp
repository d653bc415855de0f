#pragma once
// PgTransaction: the claim's transaction in two round trips, BEGIN sent with the first statement
// and COMMIT with the last (libpqxx's own transactions send BEGIN alone: a ManualTransaction).

#include <string>

#include "postgres/pqxx_compat.hpp"

namespace idem::postgres::detail {

class PgTransaction final {
 public:
  /// `preamble`: settings sent first in the same message (they roll back with the transaction).
  PgTransaction(Connection& conn, std::string preamble);
  PgTransaction(const PgTransaction&) = delete;
  PgTransaction& operator=(const PgTransaction&) = delete;

  pqxx::dbtransaction& handle() noexcept { return tx_; }

  bool begun() const noexcept { return begun_; }

  /// Sends `statement` right after BEGIN, in the same message as the transaction's first
  /// statement (at once if the transaction has begun).
  void send_first(const std::string& statement);

  /// Sends BEGIN and `statement` (may be empty) in one message; the statement's result.
  pqxx::result open_with(const std::string& statement);

  /// Sends `statement` and COMMIT in one message. On failure the transaction is rolled back and
  /// the error rethrown; a connection lost meanwhile is pqxx::in_doubt_error.
  void commit_with(std::string statement);

  void abort() { tx_.abort(); }  // ROLLBACK if anything was sent

 private:
  void send_commit();

  std::string begin_;
  std::string last_;
  bool begun_ = false;
  bool committed_ = false;
  ManualTransaction tx_;  // last: it ends (ROLLBACK) while the rest is still there
};

}  // namespace idem::postgres::detail
