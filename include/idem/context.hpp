#pragma once
// Context: what a handler may ask of the guard while it holds a key.

#include <chrono>

#include "idem/result.hpp"
#include "idem/store.hpp"
#include "idem/transaction.hpp"

namespace idem {

/// Passed to handlers that take an `idem::Context&`. Valid only during the handler call.
class Context {
 public:
  /// The fence of this holder: pass it to downstream systems that can reject stale writers.
  Fence fence() const noexcept { return ticket_.fence; }

  /// Renews the lease for `lease` from now (zero: the guard's configured lease), for handlers
  /// that run longer than planned. One store round trip. errc::lease_lost when the key was
  /// already taken over: the handler should stop.
  Status extend_lease(std::chrono::milliseconds lease = std::chrono::milliseconds{0}) {
    return extend_(store_, ticket_, lease.count() > 0 ? lease : default_lease_);
  }

  /// In transactional mode, the backend's open transaction that the record commits with, tagged
  /// with its backend; none otherwise. The adapters' accessors hand out the backend's object
  /// (idem::sqlite_transaction(ctx), idem::pg_transaction(ctx)) and refuse another kind.
  NativeTransaction native_transaction() const noexcept { return transaction_; }

  /// Built by the guard; a store type S is erased behind one function pointer.
  template <class S>
  Context(S& store, Ticket ticket, std::chrono::milliseconds default_lease,
          NativeTransaction transaction = {})
      : store_(&store),
        ticket_(ticket),
        default_lease_(default_lease),
        transaction_(transaction),
        extend_([](void* s, const Ticket& t, std::chrono::milliseconds l) {
          return static_cast<S*>(s)->extend(t, l);
        }) {}

  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

 private:
  using ExtendFn = Status (*)(void*, const Ticket&, std::chrono::milliseconds);

  void* store_;
  Ticket ticket_;
  std::chrono::milliseconds default_lease_;
  NativeTransaction transaction_;
  ExtendFn extend_;
};

}  // namespace idem
