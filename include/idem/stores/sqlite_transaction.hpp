#pragma once
// The open SQLite transaction of a transactional-mode handler. Includes SQLiteCpp: only code that
// writes inside the claim's transaction needs this header.

#include <SQLiteCpp/Database.h>

#include "idem/context.hpp"
#include "idem/error.hpp"

namespace idem {

/// The connection whose transaction the record commits with: statements run on it commit or roll
/// back together with the record. Valid only during the handler call; do not BEGIN, COMMIT or
/// ROLLBACK on it. Throws idem::Error (errc::store_unavailable) when the context has no
/// transaction, i.e. the store is not a SqliteStore in transactional mode.
inline SQLite::Database& sqlite_transaction(const Context& context) {
  void* tx = context.native_transaction();
  if (tx == nullptr) {
    throw Error(make_error_code(errc::store_unavailable),
                "idem::sqlite_transaction: no open transaction (is the store a SqliteStore in "
                "SqlMode::transactional?)");
  }
  return *static_cast<SQLite::Database*>(tx);
}

}  // namespace idem
