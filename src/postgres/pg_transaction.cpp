#include "postgres/pg_transaction.hpp"

#include <stdexcept>
#include <utility>

#include "postgres/pg_link.hpp"

namespace idem::postgres::detail {

PgTransaction::PgTransaction(Connection& conn, std::string preamble, Script script)
    : script_(std::move(script)),
      begin_(std::move(preamble) + "BEGIN"),
      tx_(conn, [this] { send_commit(); }) {}

void PgTransaction::send_first(const std::string& statement) {
  if (begun_) {
    script_(statement);
  } else {
    begin_ += "; " + statement;
  }
}

Reply PgTransaction::open_with(const std::string& statement) {
  begun_ = true;  // from here on, ending the transaction sends ROLLBACK
  return script_(statement.empty() ? begin_ : begin_ + "; " + statement);
}

void PgTransaction::commit_with(std::string statement) {
  last_ = std::move(statement);
  committed_ = false;
  tx_.commit();
  if (!committed_) {
    throw std::logic_error(  // libpqxx saw it committed already
        "idem: the claim's transaction was committed by the handler; "
        "the record was not finished in it");
  }
}

void PgTransaction::send_commit() {
  if (!begun_) {
    committed_ = true;  // nothing was sent, nothing to end
    return;
  }
  try {
    script_(last_.empty() ? std::string("COMMIT") : last_ + "; COMMIT");
  } catch (const PgError&) {
    // A failed last statement skipped the COMMIT and left the transaction open and aborted
    // (after a failed COMMIT, this ROLLBACK only draws a warning).
    abort();
    throw;
  }
  begun_ = false;
  committed_ = true;
}

void PgTransaction::abort() noexcept {
  if (!begun_) return;
  begun_ = false;
  try {
    script_("ROLLBACK");
  } catch (...) {  // the connection is gone: the server rolls back by itself
  }
}

}  // namespace idem::postgres::detail
