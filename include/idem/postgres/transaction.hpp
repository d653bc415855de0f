#pragma once
// The open PostgreSQL transaction of a transactional-mode handler. Includes libpqxx: only code
// that writes inside the claim's transaction needs this header.

#include <pqxx/transaction>

#include "idem/context.hpp"
#include "idem/transaction.hpp"

namespace idem {

/// The kind of a PostgreSQL claim's transaction.
inline constexpr TransactionKind postgres_transaction_kind{
    "PostgreSQL", "a PostgresStore in SqlMode::transactional, or an entity store on PostgreSQL"};

namespace detail {

/// A PostgreSQL claim's transaction as NativeTransaction carries it. Built by the PostgreSQL
/// sessions (src/postgres), which point it at each claim's transaction.
struct PgTransactionHandle final : TransactionHandle {
  static constexpr const TransactionKind& kKind = postgres_transaction_kind;
  PgTransactionHandle() noexcept : TransactionHandle(kKind) {}
  pqxx::dbtransaction* transaction = nullptr;
};

}  // namespace detail

/// The transaction the record commits with: statements run in it commit or roll back together
/// with the record. Its BEGIN went to the server with the claim and its COMMIT goes with the
/// record's finish, hence a pqxx::dbtransaction of the store's own rather than a pqxx::work
/// (a pqxx::subtransaction on it is a savepoint); the same type on libpqxx 6 and 7, on which a
/// failed statement leaves the transaction aborted until the store ends it. Valid only during
/// the handler call; do not commit() or abort() it. Throws idem::TransactionMismatch (a
/// std::logic_error) naming what the claim holds when it holds no PostgreSQL transaction: the
/// store is not a PostgresStore in SqlMode::transactional (or an entity store on PostgreSQL),
/// e.g. a SQLite store, lease mode or a memory store.
inline pqxx::dbtransaction& pg_transaction(const NativeTransaction& transaction) {
  return *transaction.get<detail::PgTransactionHandle>("idem::pg_transaction").transaction;
}

inline pqxx::dbtransaction& pg_transaction(const Context& context) {
  return pg_transaction(context.native_transaction());
}

}  // namespace idem
