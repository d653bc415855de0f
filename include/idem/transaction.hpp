#pragma once
// NativeTransaction: the backend transaction a claim holds open for its handler, typed by the
// backend it belongs to. The core names no backend type: each adapter's accessor header
// (sqlite/transaction.hpp, postgres/transaction.hpp) defines its handle and hands the
// transaction out, after checking that the claim holds one of its kind.

#include <concepts>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace idem {

/// Which backend's transaction a claim holds open.
enum class TransactionKind : std::uint8_t {
  none,      // no transaction: lease mode, the memory and Redis stores
  sqlite,    // a SqliteStore in SqlMode::transactional, or an entity store on SQLite
  postgres,  // a PostgresStore in SqlMode::transactional, or an entity store on PostgreSQL
};

/// "none", "sqlite" or "postgres".
constexpr std::string_view to_string(TransactionKind kind) noexcept {
  switch (kind) {
    case TransactionKind::none:
      return "none";
    case TransactionKind::sqlite:
      return "sqlite";
    case TransactionKind::postgres:
      return "postgres";
  }
  return "unknown";
}

/// Thrown when a handler asks for a transaction its claim does not hold: another backend's, or
/// any when the claim holds none. A programming error (the store, its mode or the accessor is
/// the wrong one) that no retry gets past, hence a std::logic_error and never an idem::errc such
/// as store_unavailable.
class TransactionMismatch : public std::logic_error {
 public:
  /// `accessor`: the function asked ("idem::pg_transaction").
  TransactionMismatch(std::string_view accessor, TransactionKind asked, TransactionKind held)
      : std::logic_error(describe(accessor, asked, held)), asked_(asked), held_(held) {}

  /// The kind the accessor hands out.
  TransactionKind asked() const noexcept { return asked_; }
  /// The kind the claim holds (TransactionKind::none: no transaction).
  TransactionKind held() const noexcept { return held_; }

 private:
  static std::string_view backend(TransactionKind kind) noexcept {
    return kind == TransactionKind::sqlite ? "SQLite" : "PostgreSQL";
  }
  static std::string_view runs_inside(TransactionKind kind) noexcept {
    return kind == TransactionKind::sqlite
               ? "a SqliteStore in SqlMode::transactional, or an entity store on SQLite"
               : "a PostgresStore in SqlMode::transactional, or an entity store on PostgreSQL";
  }
  static std::string describe(std::string_view accessor, TransactionKind asked,
                              TransactionKind held) {
    std::string what(accessor);
    what.append(": asked for a ").append(backend(asked)).append(" transaction, but the claim ");
    if (held == TransactionKind::none) {
      what.append("has no open transaction");
    } else {
      what.append("holds a ").append(backend(held)).append(" one");
    }
    return what.append("; only ")
        .append(runs_inside(asked))
        .append(", runs the handler inside one");
  }

  TransactionKind asked_;
  TransactionKind held_;
};

namespace detail {

/// What an adapter's transaction handle starts with: its kind. An adapter derives one handle
/// type per kind, with `static constexpr TransactionKind kKind` and the backend's object.
class TransactionHandle {
 public:
  TransactionKind kind() const noexcept { return kind_; }

 protected:
  explicit constexpr TransactionHandle(TransactionKind kind) noexcept : kind_(kind) {}
  ~TransactionHandle() = default;

 private:
  TransactionKind kind_;
};

}  // namespace detail

/// The open transaction of a claim, or none: the kind and the adapter's handle to it. As cheap
/// to copy as a pointer; valid while the claim holds the key. Stores build it (Claim::transaction);
/// handlers reach the backend's object through an adapter's accessor
/// (idem::sqlite_transaction(ctx), idem::pg_transaction(ctx)), which checks the kind.
class NativeTransaction {
 public:
  /// No transaction.
  constexpr NativeTransaction() noexcept = default;

  /// The transaction behind an adapter's handle, which must outlive every copy.
  template <class Handle>
  requires std::derived_from<Handle, detail::TransactionHandle>
  explicit NativeTransaction(const Handle& handle) noexcept : handle_(&handle) {}

  TransactionKind kind() const noexcept {
    return handle_ == nullptr ? TransactionKind::none : handle_->kind();
  }
  /// Whether the claim holds a transaction.
  explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// The same transaction (or both none).
  friend bool operator==(const NativeTransaction&, const NativeTransaction&) = default;

  /// The handle, when it is of Handle's kind; else throws TransactionMismatch naming `accessor`,
  /// the kind asked for and the kind held.
  template <class Handle>
  requires std::derived_from<Handle, detail::TransactionHandle>
  const Handle& get(std::string_view accessor) const {
    if (kind() != Handle::kKind) throw TransactionMismatch(accessor, Handle::kKind, kind());
    return static_cast<const Handle&>(*handle_);
  }

 private:
  const detail::TransactionHandle* handle_ = nullptr;
};

}  // namespace idem
