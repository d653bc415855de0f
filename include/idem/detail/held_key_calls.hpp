#pragma once
// The calls about a held key that a wrapping store (CachedStore, GroupCommitStore) passes on
// unchanged (lease, rewind, steps, kept request, the wait for a holder), each where the wrapped
// store has it.

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
  void await_change(const Ticket& held,
                    std::chrono::milliseconds bound) requires WakingStore<Inner> {
    wrapped_store().await_change(held, bound);
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
