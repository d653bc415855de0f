#pragma once
// The open PostgreSQL transaction of a transactional-mode handler. Includes libpqxx: only code
// that writes inside the claim's transaction needs this header.

#include <pqxx/transaction>

#include <stdexcept>

#include "idem/context.hpp"
#include "idem/error.hpp"

namespace idem {

/// The transaction the record commits with: statements run in it commit or roll back together
/// with the record. Its BEGIN went to the server with the claim and its COMMIT goes with the
/// record's finish, hence a pqxx::dbtransaction of the store's own rather than a pqxx::work
/// (a pqxx::subtransaction on it is a savepoint); the same type on libpqxx 6 and 7, on which a
/// failed statement leaves the transaction aborted until the store ends it. Valid only during
/// the handler call; do not commit() or abort() it. Throws std::logic_error when the context has
/// no transaction, i.e. the store is not a PostgresStore in SqlMode::transactional.
inline pqxx::dbtransaction& pg_transaction(const Context& context) {
  void* tx = context.native_transaction();
  if (tx == nullptr) {
    // A programming error (the store or its mode is wrong), not an outage to retry.
    throw std::logic_error(
        "idem::pg_transaction: the claim has no open transaction; only a PostgresStore in "
        "SqlMode::transactional (or an entity store on it) runs the handler inside one");
  }
  return *static_cast<pqxx::dbtransaction*>(tx);
}

}  // namespace idem
