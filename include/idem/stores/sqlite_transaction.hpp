#pragma once
// The open SQLite transaction of a transactional-mode handler. Includes SQLiteCpp: only code that
// writes inside the claim's transaction needs this header.

#include <SQLiteCpp/Database.h>

#include <stdexcept>

#include "idem/context.hpp"
#include "idem/error.hpp"

namespace idem {

/// The connection whose transaction the record commits with: statements run on it commit or roll
/// back together with the record. Valid only during the handler call; do not BEGIN, COMMIT or
/// ROLLBACK on it. Throws std::logic_error when the context has no
/// transaction, i.e. the store is not a SqliteStore in transactional mode.
inline SQLite::Database& sqlite_transaction(const Context& context) {
  void* tx = context.native_transaction();
  if (tx == nullptr) {
    // A programming error (the store or its mode is wrong), not an outage to retry.
    throw std::logic_error(
        "idem::sqlite_transaction: the claim has no open transaction; only a SqliteStore in "
        "SqlMode::transactional (or an entity store on it) runs the handler inside one");
  }
  return *static_cast<SQLite::Database*>(tx);
}

}  // namespace idem
