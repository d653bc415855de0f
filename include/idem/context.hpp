#pragma once
// Context: what a handler may ask of the guard while it holds a key.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "idem/codec.hpp"
#include "idem/engine/sim_hooks.hpp"
#include "idem/error.hpp"
#include "idem/result.hpp"
#include "idem/steps.hpp"
#include "idem/store.hpp"
#include "idem/transaction.hpp"

namespace idem {

/// Passed to handlers that take an `idem::Context&`. Valid only during the handler call.
class Context {
 public:
  /// The fence of this holder: pass it to downstream systems that can reject stale writers.
  Fence fence() const noexcept { return ticket_.fence; }

  /// Renews the lease for `lease` from now (zero: the guard's lease); one store round trip.
  /// errc::lease_lost when the key was already taken over: the handler should stop.
  Status extend_lease(std::chrono::milliseconds lease = std::chrono::milliseconds{0}) {
    return extend_(store_, ticket_, lease.count() > 0 ? lease : default_lease_);
  }

  /// In transactional mode, the backend's open transaction the record commits with (reached
  /// through idem::sqlite_transaction(ctx), idem::pg_transaction(ctx)); none otherwise.
  NativeTransaction native_transaction() const noexcept { return transaction_; }

  /// Runs `fn` (called with this Context& or with nothing) as the handler's next step, once per
  /// key: its result is saved with the record under this holder's fence, and a later run of the
  /// key gets it back without running `fn` again (docs/steps.md). Steps come in the same order
  /// under the same names on every run, each name once, else idem::Error(errc::step_mismatch).
  /// The result needs an idem::codec (or is void). If `fn` throws, nothing is saved. Throws
  /// idem::Error with the store's code when the step cannot be loaded or saved (lease_lost: stop),
  /// and std::logic_error on a store that keeps no steps (idem::StepStore).
  template <class Fn>
  auto step(std::string_view name, Fn&& fn) {
    using R = step_result_t<Fn>;
    detail::require_codable<R>();
    const std::size_t index = next_step(name);
    if (index < steps_->recorded.size() && !IDEM_SIM_MUTATE(12)) {
      return replay_step<R>(index);
    } else if constexpr (std::is_void_v<R>) {
      call_step(fn);
      save(index, name, {});
    } else {
      R value = call_step(fn);
      std::string encoded;
      save(index, name, detail::stored_bytes(value, encoded));
      return value;
    }
  }

  /// A step whose writes commit together with its step record, in a transaction of the store's
  /// own that `fn` reaches through sqlite_transaction(ctx) / pg_transaction(ctx); if `fn` throws
  /// or the key was taken over, neither remains (docs/steps.md). Otherwise as step(). Throws
  /// std::logic_error on a store without transactions (idem::AtomicStepStore).
  template <class Fn>
  auto atomic_step(std::string_view name, Fn&& fn) {
    using R = step_result_t<Fn>;
    detail::require_codable<R>();
    if (atomic_ == nullptr) {
      throw std::logic_error(
          "idem: Context::atomic_step() on a store without transactions (see "
          "idem::AtomicStepStore)");
    }
    const std::size_t index = next_step(name);
    if (index < steps_->recorded.size() && !IDEM_SIM_MUTATE(12)) {
      return replay_step<R>(index);
    } else {
      using Stored = std::conditional_t<std::is_void_v<R>, bool, R>;
      struct Run {
        Context* context;
        std::remove_reference_t<Fn>* fn;
        std::optional<Stored> value;
        std::exception_ptr error;
      } run{this, &fn, std::nullopt, nullptr};
      const AtomicStepBody body{
          [](void* state, NativeTransaction transaction, std::string& result) {
            Run& r = *static_cast<Run*>(state);
            const NativeTransaction outer = std::exchange(r.context->transaction_, transaction);
            try {
              if constexpr (std::is_void_v<R>) {
                r.context->call_step(*r.fn);
                r.value.emplace(true);
                result.clear();
              } else {
                r.value.emplace(r.context->call_step(*r.fn));
                result = codec<R>::encode(*r.value);
              }
            } catch (...) {
              r.error = std::current_exception();
            }
            r.context->transaction_ = outer;
            return r.error == nullptr;
          },
          &run};
      Status saved = atomic_(store_, ticket_, static_cast<std::uint32_t>(index), name, body);
      if (run.error) std::rethrow_exception(run.error);
      if (!saved) raise(saved.failure());
      if constexpr (!std::is_void_v<R>) return std::move(*run.value);
    }
  }

  /// A key for the outside world, stable for this record's key and `step_name` on every run and
  /// process, distinct for any other: a downstream API's idempotency key for the step's call.
  std::string step_key(std::string_view step_name) const {
    return derive_step_key(ticket_.key, step_name);
  }

  /// Steps this run found recorded and returned without running them, so far.
  std::size_t steps_replayed() const noexcept { return steps_ ? steps_->replayed : 0; }

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
        }) {
    if constexpr (StepStore<S>) {
      load_ = [](void* s, const Ticket& t) { return static_cast<S*>(s)->load_steps(t); };
      save_ = [](void* s, const Ticket& t, const StepWrite& w) {
        return static_cast<S*>(s)->save_step(t, w);
      };
    }
    if constexpr (AtomicStepStore<S>) {
      atomic_ = [](void* s, const Ticket& t, std::uint32_t i, std::string_view n,
                   AtomicStepBody b) {
        return static_cast<S*>(s)->save_step_atomically(t, i, n, b);
      };
    }
  }

  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

 private:
  using ExtendFn = Status (*)(void*, const Ticket&, std::chrono::milliseconds);
  using LoadFn = Result<std::vector<StepRecord>> (*)(void*, const Ticket&);
  using SaveFn = Status (*)(void*, const Ticket&, const StepWrite&);
  using AtomicFn = Status (*)(void*, const Ticket&, std::uint32_t, std::string_view,
                              AtomicStepBody);

  template <class Fn>
  static constexpr bool kStepTakesContext = std::is_invocable_v<Fn&, Context&>;

  template <class Fn, bool = kStepTakesContext<Fn>>
  struct StepResult {
    using type = std::remove_cvref_t<std::invoke_result_t<Fn&, Context&>>;
  };
  template <class Fn>
  struct StepResult<Fn, false> {
    using type = std::remove_cvref_t<std::invoke_result_t<Fn&>>;
  };
  template <class Fn>
  using step_result_t = typename StepResult<std::remove_reference_t<Fn>>::type;

  template <class Fn>
  decltype(auto) call_step(Fn& fn) {
    if constexpr (kStepTakesContext<Fn>) {
      return std::invoke(fn, *this);
    } else {
      return std::invoke(fn);
    }
  }

  [[noreturn]] static void raise(const Failure& f) {
    if (f.message.empty()) throw Error(f.code);
    throw Error(f.code, f.message);
  }

  // A step an earlier run completed: its recorded result, without running it again.
  template <class R>
  R replay_step(std::size_t index) {
    ++steps_->replayed;
    if constexpr (!std::is_void_v<R>) {
      return codec<R>::decode(std::string_view(steps_->recorded[index].result));
    }
  }

  // The index of step `name` in this run: loads the recorded steps on the first call and checks
  // that `name` is the one recorded there, and new in this run.
  std::size_t next_step(std::string_view name) {
    if (load_ == nullptr) {
      throw std::logic_error(
          "idem: Context::step() on a store that keeps no steps (see idem::StepStore)");
    }
    if (!steps_) {
      Result<std::vector<StepRecord>> recorded = load_(store_, ticket_);
      if (!recorded) raise(recorded.failure());
      steps_ = std::make_unique<Steps>();
      steps_->recorded = std::move(recorded).value();
    }
    const std::vector<StepRecord>& recorded = steps_->recorded;
    std::vector<std::string>& names = steps_->names;
    const std::size_t index = names.size();
    for (const std::string& seen : names) {
      if (seen == name) {
        throw Error(make_error_code(errc::step_mismatch),
                    "step '" + std::string(name) + "' came twice in one run of the handler");
      }
    }
    if (index < recorded.size() && recorded[index].name != name) {
      throw Error(make_error_code(errc::step_mismatch),
                  "step " + std::to_string(index) + " is '" + std::string(name) +
                      "' but the key recorded '" + recorded[index].name +
                      "' there: steps must come in the same order under the same names");
    }
    names.emplace_back(name);
    return index;
  }

  void save(std::size_t index, std::string_view name, std::string_view bytes) {
    Status saved =
        save_(store_, ticket_, StepWrite{static_cast<std::uint32_t>(index), name, bytes});
    if (!saved) raise(saved.failure());
  }

  void* store_;
  Ticket ticket_;
  std::chrono::milliseconds default_lease_;
  NativeTransaction transaction_;
  ExtendFn extend_;
  LoadFn load_ = nullptr;  // null: the store keeps no steps
  SaveFn save_ = nullptr;
  AtomicFn atomic_ = nullptr;  // null: the store has no transactions of its own
  struct Steps {
    std::vector<StepRecord> recorded;  // what earlier runs completed, in order
    std::vector<std::string> names;    // the steps of this run so far
    std::size_t replayed = 0;
  };
  // Made at the first step: a handler without steps (the common case) builds none of it.
  std::unique_ptr<Steps> steps_;
};

}  // namespace idem
