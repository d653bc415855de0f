#include "postgres/pg_transaction.hpp"

#include <exception>
#include <utility>

namespace idem::postgres::detail {

namespace {

pqxx::in_doubt_error in_doubt() {
  return pqxx::in_doubt_error(
      "idem: connection lost while committing; the transaction may or may not have committed");
}

}  // namespace

PgTransaction::PgTransaction(Connection& conn, std::string preamble)
    : begin_(std::move(preamble) + "BEGIN"), tx_(conn, [this] { send_commit(); }) {}

void PgTransaction::send_first(const std::string& statement) {
  if (begun_) {
    tx_.exec(statement);
  } else {
    begin_ += "; " + statement;
  }
}

pqxx::result PgTransaction::open_with(const std::string& statement) {
  begun_ = true;
  tx_.begun();  // from here on, ending the transaction sends ROLLBACK
  return tx_.exec(statement.empty() ? begin_ : begin_ + "; " + statement);
}

void PgTransaction::commit_with(std::string statement) {
  last_ = std::move(statement);
  committed_ = false;
  tx_.commit();
  if (!committed_) {
    throw pqxx::usage_error(  // libpqxx saw it committed already
        "idem: the claim's transaction was committed by the handler; "
        "the record was not finished in it");
  }
}

void PgTransaction::send_commit() {
  if (!begun_) {
    committed_ = true;  // nothing was sent, nothing to end
    return;
  }
  const std::string message = last_.empty() ? std::string("COMMIT") : last_ + "; COMMIT";
  try {
    tx_.send(message);
  } catch (const pqxx::sql_error&) {
    if (!tx_.conn().is_open()) throw in_doubt();
    // A failed last statement skipped the COMMIT and left the transaction open and aborted
    // (after a failed COMMIT, this ROLLBACK only draws a warning).
    try {
      tx_.send("ROLLBACK");
    } catch (...) {  // the connection went: the server rolls back on its own
    }
    throw;
  } catch (const std::exception&) {
    if (!tx_.conn().is_open()) throw in_doubt();
    throw;
  }
  committed_ = true;
}

}  // namespace idem::postgres::detail
