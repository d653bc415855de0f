#pragma once
// PgTransaction: the claim's transaction on PostgreSQL, two round trips in all. BEGIN does not
// travel on its own: it goes in front of the transaction's first statement (open_with), and
// COMMIT goes behind its last one (commit_with), so that a claim and a finish are one round trip
// each. libpqxx's own transactions send BEGIN from their constructor, hence a
// ManualTransaction, whose failed statements also leave the transaction to the server.

#include <string>

#include "postgres/pqxx_compat.hpp"

namespace idem::postgres::detail {

class PgTransaction final {
 public:
  /// `preamble`: statements to run first in the same message (settings; they roll back with the
  /// transaction).
  PgTransaction(Connection& conn, std::string preamble);
  PgTransaction(const PgTransaction&) = delete;
  PgTransaction& operator=(const PgTransaction&) = delete;

  /// What handlers and the session's statements run on.
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

  /// Ends the transaction: ROLLBACK if anything was sent.
  void abort() { tx_.abort(); }

 private:
  // What the transaction's commit() sends.
  void send_commit();

  std::string begin_;
  std::string last_;
  bool begun_ = false;
  bool committed_ = false;
  ManualTransaction tx_;  // last: it ends (ROLLBACK) while the rest is still there
};

}  // namespace idem::postgres::detail
