#pragma once
// The calls about a held key that a store wrapping another (CachedStore, GroupCommitStore) passes
// on unchanged: a held key's lease, rewind, steps and kept request are the wrapped store's, saved
// under its fence, and the wrapper keeps nothing for a held key (GroupCommitStore: a caller's
// commit returns only once written, after its steps). Each exists where the wrapped store has it,
// so the wrapper claims the same optional capabilities.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "idem/result.hpp"
#include "idem/steps.hpp"
#include "idem/store.hpp"

namespace idem::detail {

/// CRTP base: Derived gives it `Inner& wrapped()` (as a friend).
template <class Derived, class Inner>
class HeldKeyCalls {
 public:
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease) {
    return wrapped_store().extend(ticket, lease);
  }
  Status rewind(const Ticket& ticket) requires RewindableStore<Inner> {
    return wrapped_store().rewind(ticket);
  }
  Result<std::vector<StepRecord>> load_steps(const Ticket& ticket) requires StepStore<Inner> {
    return wrapped_store().load_steps(ticket);
  }
  Status save_step(const Ticket& ticket, const StepWrite& step) requires StepStore<Inner> {
    return wrapped_store().save_step(ticket, step);
  }
  Status save_step_atomically(const Ticket& ticket, std::uint32_t index, std::string_view name,
                              AtomicStepBody body) requires AtomicStepStore<Inner> {
    return wrapped_store().save_step_atomically(ticket, index, name, body);
  }
  Status keep_request(const Ticket& ticket,
                      std::string_view request) requires CompletableStore<Inner> {
    return wrapped_store().keep_request(ticket, request);
  }
  Result<std::vector<Abandoned>> find_abandoned(std::string_view prefix, std::size_t limit) requires
      CompletableStore<Inner> {
    return wrapped_store().find_abandoned(prefix, limit);
  }

 private:
  Inner& wrapped_store() noexcept { return static_cast<Derived&>(*this).wrapped(); }
};

}  // namespace idem::detail
