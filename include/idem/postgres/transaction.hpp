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

/// The transaction the record commits with: statements run in it commit or roll back with the
/// record. A pqxx::dbtransaction of the store's own (its BEGIN went with the claim, its COMMIT
/// goes with the finish; a pqxx::subtransaction on it is a savepoint). Valid only during the
/// handler call; do not commit() or abort() it. Throws idem::TransactionMismatch (a
/// std::logic_error) when the claim holds no PostgreSQL transaction.
inline pqxx::dbtransaction& pg_transaction(const NativeTransaction& transaction) {
  return *transaction.get<detail::PgTransactionHandle>("idem::pg_transaction").transaction;
}

inline pqxx::dbtransaction& pg_transaction(const Context& context) {
  return pg_transaction(context.native_transaction());
}

}  // namespace idem
