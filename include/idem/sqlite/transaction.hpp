#pragma once
// The open SQLite transaction of a transactional-mode handler. Includes SQLiteCpp: only code that
// writes inside the claim's transaction needs this header.

#include <SQLiteCpp/Database.h>

#include "idem/context.hpp"
#include "idem/transaction.hpp"

namespace idem {

/// The kind of a SQLite claim's transaction.
inline constexpr TransactionKind sqlite_transaction_kind{
    "SQLite", "a SqliteStore in SqlMode::transactional, or an entity store on SQLite"};

namespace detail {

/// A SQLite claim's transaction as NativeTransaction carries it: the connection it runs on.
/// Built by the SQLite sessions (src/sqlite).
struct SqliteTransactionHandle final : TransactionHandle {
  static constexpr const TransactionKind& kKind = sqlite_transaction_kind;
  explicit SqliteTransactionHandle(SQLite::Database& db) noexcept
      : TransactionHandle(kKind), database(&db) {}
  SQLite::Database* database;
};

}  // namespace detail

/// The connection whose transaction the record commits with: statements run on it commit or roll
/// back with the record. Valid only during the handler call; do not BEGIN, COMMIT or ROLLBACK on
/// it. Throws idem::TransactionMismatch (a std::logic_error) when the claim holds no SQLite
/// transaction.
inline SQLite::Database& sqlite_transaction(const NativeTransaction& transaction) {
  return *transaction.get<detail::SqliteTransactionHandle>("idem::sqlite_transaction").database;
}

inline SQLite::Database& sqlite_transaction(const Context& context) {
  return sqlite_transaction(context.native_transaction());
}

}  // namespace idem
