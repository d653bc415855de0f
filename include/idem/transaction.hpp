#pragma once
// NativeTransaction: the backend transaction a claim holds open for its handler, typed by the
// backend it belongs to; each adapter's accessor header defines its kind and handle.

#include <concepts>
#include <stdexcept>
#include <string>
#include <string_view>

namespace idem {

/// Which backend's transaction a claim holds open. Each adapter defines its kind in its accessor
/// header (idem::sqlite_transaction_kind, ...); kinds compare by identity.
class TransactionKind {
 public:
  /// `name`: the backend ("SQLite"); `runs_inside`: what runs a handler in one, for messages.
  consteval TransactionKind(std::string_view name, std::string_view runs_inside) noexcept
      : name_(name), runs_inside_(runs_inside) {}
  TransactionKind(const TransactionKind&) = delete;  // a kind is its object: no copies
  TransactionKind& operator=(const TransactionKind&) = delete;

  constexpr std::string_view name() const noexcept { return name_; }
  constexpr std::string_view runs_inside() const noexcept { return runs_inside_; }

  /// The same kind: the same object.
  friend constexpr bool operator==(const TransactionKind& a, const TransactionKind& b) noexcept {
    return &a == &b;
  }

 private:
  std::string_view name_;
  std::string_view runs_inside_;
};

inline constexpr TransactionKind no_transaction{"none", "nothing"};  ///< lease mode, memory, Redis

/// The kind's name: "none", "SQLite", "PostgreSQL", ...
constexpr std::string_view to_string(const TransactionKind& kind) noexcept { return kind.name(); }

/// Thrown when a handler asks for a transaction its claim does not hold (another backend's, or
/// any when there is none): a programming error no retry gets past, never an idem::errc.
class TransactionMismatch : public std::logic_error {
 public:
  /// `accessor`: the function asked ("idem::pg_transaction").
  TransactionMismatch(std::string_view accessor, const TransactionKind& asked,
                      const TransactionKind& held)
      : std::logic_error(describe(accessor, asked, held)), asked_(&asked), held_(&held) {}

  /// The kind the accessor hands out.
  const TransactionKind& asked() const noexcept { return *asked_; }
  /// The kind the claim holds (idem::no_transaction: none).
  const TransactionKind& held() const noexcept { return *held_; }

 private:
  static std::string describe(std::string_view accessor, const TransactionKind& asked,
                              const TransactionKind& held) {
    std::string what(accessor);
    what.append(": asked for a ").append(asked.name()).append(" transaction, but the claim ");
    if (held == no_transaction) {
      what.append("has no open transaction");
    } else {
      what.append("holds a ").append(held.name()).append(" one");
    }
    return what.append("; only ")
        .append(asked.runs_inside())
        .append(", runs the handler inside one");
  }

  const TransactionKind* asked_;
  const TransactionKind* held_;
};

namespace detail {

/// What an adapter's transaction handle starts with: its kind (`static constexpr const
/// TransactionKind& kKind` in each derived handle type).
class TransactionHandle {
 public:
  const TransactionKind& kind() const noexcept { return *kind_; }

 protected:
  explicit constexpr TransactionHandle(const TransactionKind& kind) noexcept : kind_(&kind) {}
  ~TransactionHandle() = default;

 private:
  const TransactionKind* kind_;
};

}  // namespace detail

/// The open transaction of a claim, or none: the kind and the adapter's handle. As cheap to copy
/// as a pointer; valid while the claim holds the key. Handlers reach the backend's object through
/// an adapter's accessor, which checks the kind.
class NativeTransaction {
 public:
  /// No transaction.
  constexpr NativeTransaction() noexcept = default;

  /// The transaction behind an adapter's handle, which must outlive every copy.
  template <class Handle>
  requires std::derived_from<Handle, detail::TransactionHandle>
  explicit NativeTransaction(const Handle& handle) noexcept : handle_(&handle) {}

  /// The kind of the transaction held; idem::no_transaction when none is.
  const TransactionKind& kind() const noexcept {
    return handle_ == nullptr ? no_transaction : handle_->kind();
  }
  /// Whether the claim holds a transaction.
  explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// The same transaction (or both none).
  friend bool operator==(const NativeTransaction&, const NativeTransaction&) = default;

  /// The handle, when it is of Handle's kind; else throws TransactionMismatch.
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
