#pragma once
// StateMachineStore: the state-machine strategy (docs/design.md §12) on memory, SQLite or
// PostgreSQL, chosen by a backend tag: idem::MemoryBackend (idem/memory/entities.hpp),
// SqliteBackend (idem/sqlite/entities.hpp) or PostgresBackend (idem/postgres/entities.hpp).

#include <concepts>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "idem/attempt.hpp"
#include "idem/engine/engine.hpp"
#include "idem/engine/entity.hpp"
#include "idem/engine/entity_guard.hpp"
#include "idem/guard.hpp"
#include "idem/options.hpp"
#include "idem/outcome.hpp"
#include "idem/store_stats.hpp"
#include "idem/transition_table.hpp"

namespace idem {

/// A state machine: anything with a table() that gives its idem::TransitionTable (the table
/// itself is one).
template <class M>
concept StateMachine = requires(const M& m) {
  { m.table() } -> std::convertible_to<const TransitionTable&>;
};

/// The key of a transition: the entity, the event, and optionally an operation id. Without an id
/// the operation is the event itself: a repeat of an applied event replays its result. With an
/// id the same event may apply again under another id (machines with cycles).
struct EventKey {
  std::string_view entity;
  std::string_view event;
  std::string_view operation{};
};

/// An Outcome with what a transition refusal knows (its CurrentState refusal): the entity's state
/// and the events the table allows from it on errc::invalid_transition (empty otherwise, and for
/// an event the table does not declare).
template <class T>
class [[nodiscard]] TransitionOutcome : public Outcome<T> {
 public:
  explicit TransitionOutcome(Outcome<T>&& outcome) : Outcome<T>(std::move(outcome)) {}
  const std::string& current_state() const noexcept { return refused().state; }
  const std::vector<std::string>& allowed_events() const noexcept {
    return refused().allowed_events;
  }

 private:
  const CurrentState& refused() const noexcept {
    static const CurrentState none{};
    const auto* state = std::get_if<CurrentState>(&this->refusal());
    return state != nullptr ? *state : none;
  }
};

template <class Backend>
struct StateMachineStoreOptions {
  /// How to reach the database (MemoryBackend: nothing).
  typename Backend::Options backend{};
  /// The user's table: name, id column (default "id"), state column (default "state"), holding
  /// state names as text. Not used by MemoryBackend.
  EntityTable table{.table = {}, .id_column = "id", .column = "state"};
  /// The guard behind execute(): scope (unset: "state"), in-progress policy (unset: Wait{}, a
  /// claim waits for the entity's current holder), observer, result limits. Fields left unset
  /// keep these defaults (idem::Options).
  Options guard{};
};

/// Transitions of an entity's state, each applied once.
///
/// execute({entity, event}, fn): the claim is the conditional transition `SET state = <to> WHERE
/// id = ? AND state IN (<allowed from>)`, and fn runs while it holds the entity: on SQL inside the
/// claim's transaction (sqlite_transaction(ctx) / pg_transaction(ctx)), which commits the new
/// state, the handler's writes and the op-log row together, or rolls all of them back if fn
/// throws or the process dies; in memory under the entity's lock.
///
/// | the entity...                          | execute({entity, event, op}, fn)                   |
/// |----------------------------------------|----------------------------------------------------|
/// | is in one of the event's from-states   | runs fn; the entity moves to the event's to-state  |
/// | had this operation applied             | replays its stored result                          |
/// | is in another state                    | errc::invalid_transition naming the event, the     |
/// |                                        | current state and the allowed from-states          |
/// | event not in the table                 | errc::invalid_transition                           |
/// | held by another caller                 | waits (Options::in_progress) or errc::in_progress  |
/// | does not exist                         | errc::key_invalid                                  |
///
/// Cost as VersionStore's. Thread-safe. It runs the guards' protocol engine over its backend:
/// every guard option applies.
template <StateMachine Machine, class Backend>
class StateMachineStore : public detail::EntityGuard<Backend> {
  using Base = detail::EntityGuard<Backend>;
  using Base::impl_;

 public:
  /// What the guard options' unset fields become (idem::Options).
  static constexpr OptionDefaults kDefaults{.scope = "state", .in_progress = Wait{}};

  /// Throws std::invalid_argument for a table or column name that is not an identifier, a bad
  /// table prefix, or guard options out of range. (The table was validated when it was built.)
  explicit StateMachineStore(Machine machine, StateMachineStoreOptions<Backend> options = {})
      : Base(options.backend, detail::EntityKind::state,
             detail::with_default_column(options.table, "state"), std::move(options.guard),
             kDefaults),
        machine_(std::move(machine)) {}

  template <class Fn>
  [[nodiscard]] TransitionOutcome<handler_result_t<Fn>> execute(const EventKey& key, Fn&& fn) {
    return execute(key, std::string_view{}, std::forward<Fn>(fn));
  }

  /// Applies the event once and runs fn with it (see the class comment).
  template <class Fn>
  [[nodiscard]] TransitionOutcome<handler_result_t<Fn>> execute(const EventKey& key,
                                                                std::string_view payload, Fn&& fn) {
    using R = handler_result_t<Fn>;
    const Transition* t = table().find(key.event);
    if (t == nullptr) {
      return TransitionOutcome<R>(Outcome<R>::failed(
          make_failure(errc::invalid_transition,
                       "event '" + std::string(key.event) + "' is not in the transition table")));
    }
    const std::string op = this->op_id(key.operation, 'e', key.event);
    if (Failure too_long = this->check_length(key.entity, op); too_long.code) {
      return TransitionOutcome<R>(Outcome<R>::failed(std::move(too_long)));
    }
    detail::CasRequest shape{};
    shape.from = t->from;
    shape.to = t->to;
    auto refuse = [&](const std::string& current) -> Result<Claim> {
      std::string allowed;
      for (const std::string& f : t->from) allowed += (allowed.empty() ? "" : ", ") + f;
      Failure refused = make_failure(errc::invalid_transition,
                                     "event " + t->event + " is not allowed from state " + current +
                                         " (allowed from: " + allowed + ") on entity '" +
                                         std::string(key.entity) + "'");
      CurrentState state{current, {}};
      for (const Transition& other : table().transitions()) {
        if (table().allows(other.event, current)) state.allowed_events.push_back(other.event);
      }
      refused.refusal = std::move(state);
      return refused;
    };
    return TransitionOutcome<R>(this->template run<R>(key.entity, op, shape, payload, refuse, fn));
  }

  /// The entity's current state, read outside any claim. errc::key_invalid: no such entity.
  Result<std::string> state(std::string_view entity) { return impl_.current(entity); }

  /// MemoryBackend: creates the entity in `state` (or moves it there).
  void put(std::string_view entity,
           std::string state) requires detail::PutsEntities<typename Backend::Impl> {
    impl_.put(entity, std::move(state));
  }

  const TransitionTable& table() const { return machine_.table(); }

 private:
  Machine machine_;
};

}  // namespace idem
