#pragma once
// OwnedGuard<S>: an IdempotencyGuard that a store keeps over itself, for stores whose keys are
// not idem::Key (tokens) or that offer execute() directly (request-ID caches). The guard is
// created once the store is complete, so S may hold it as a member.

#include <memory>
#include <utility>

#include "idem/guard.hpp"
#include "idem/options.hpp"

namespace idem::detail {

template <class S>
class OwnedGuard {
 public:
  /// Call from S's constructor body (S is complete there). Throws what the guard throws.
  void bind(S& store, Options options) {
    guard_ = std::make_unique<IdempotencyGuard<S>>(store, std::move(options));
  }
  IdempotencyGuard<S>& get() const noexcept { return *guard_; }

 private:
  std::unique_ptr<IdempotencyGuard<S>> guard_;
};

}  // namespace idem::detail
