#pragma once
// TransitionTable: the events of a state machine, the states each is allowed from, and the state
// it leads to (docs/design.md §12). Validated when built; printable as a Mermaid diagram.

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace idem {

/// One row of a transition table: `event` moves an entity from any state of `from` to `to`.
struct Transition {
  std::string event;
  std::vector<std::string> from;
  std::string to;
};

/// A state machine declared in C++: states (names; enums through of()), the initial one, and its
/// transitions. The constructor throws std::invalid_argument naming the culprit for an empty or
/// repeated state, an unknown state, an event declared twice, an empty from-list, or a state
/// unreachable from the initial one.
class TransitionTable {
 public:
  TransitionTable(std::string initial, std::vector<std::string> states,
                  std::vector<Transition> transitions)
      : initial_(std::move(initial)),
        states_(std::move(states)),
        transitions_(std::move(transitions)) {
    validate();
  }

  /// The same from an enum: `name(e)` gives each state's name.
  template <class E, class Name>
  requires std::is_enum_v<E>
  static TransitionTable of(
      E initial, std::initializer_list<E> states, Name&& name,
      std::initializer_list<std::tuple<std::string, std::vector<E>, E>> rows) {
    std::vector<std::string> names;
    for (E s : states) names.emplace_back(name(s));
    std::vector<Transition> ts;
    for (const auto& [event, from, to] : rows) {
      Transition t{event, {}, std::string(name(to))};
      for (E f : from) t.from.emplace_back(name(f));
      ts.push_back(std::move(t));
    }
    return TransitionTable(std::string(name(initial)), std::move(names), std::move(ts));
  }

  /// A table is its own idem::StateMachine.
  const TransitionTable& table() const noexcept { return *this; }

  const std::string& initial() const noexcept { return initial_; }
  const std::vector<std::string>& states() const noexcept { return states_; }
  const std::vector<Transition>& transitions() const noexcept { return transitions_; }

  /// The transition of `event`, or null when the table has no such event.
  const Transition* find(std::string_view event) const noexcept {
    for (const Transition& t : transitions_) {
      if (t.event == event) return &t;
    }
    return nullptr;
  }

  bool has_state(std::string_view state) const noexcept {
    return std::find(states_.begin(), states_.end(), state) != states_.end();
  }

  /// True when `event` is declared and allowed from `state`.
  bool allows(std::string_view event, std::string_view state) const noexcept {
    const Transition* t = find(event);
    return t != nullptr && std::find(t->from.begin(), t->from.end(), state) != t->from.end();
  }

  /// The table as Mermaid `stateDiagram-v2` text: the initial arrow, one arrow per event and
  /// from-state (labelled with the event), and an arrow out of each state that has no event.
  std::string mermaid() const {
    std::string out = "stateDiagram-v2\n    [*] --> " + initial_ + "\n";
    for (const Transition& t : transitions_) {
      for (const std::string& f : t.from)
        out += "    " + f + " --> " + t.to + " : " + t.event + "\n";
    }
    for (const std::string& s : states_) {
      const bool leaves = std::any_of(transitions_.begin(), transitions_.end(), [&](const auto& t) {
        return std::find(t.from.begin(), t.from.end(), s) != t.from.end();
      });
      if (!leaves) out += "    " + s + " --> [*]\n";
    }
    return out;
  }

 private:
  [[noreturn]] static void refuse(const std::string& why) {
    throw std::invalid_argument("idem::TransitionTable: " + why);
  }

  void validate() const {
    std::set<std::string, std::less<>> seen;
    for (const std::string& s : states_) {
      if (s.empty()) refuse("a state has an empty name");
      if (!seen.insert(s).second) refuse("state '" + s + "' is declared twice");
    }
    if (!has_state(initial_)) refuse("initial state '" + initial_ + "' is not a declared state");
    std::set<std::string, std::less<>> events;
    for (const Transition& t : transitions_) {
      if (t.event.empty()) refuse("an event has an empty name");
      if (!events.insert(t.event).second) refuse("event '" + t.event + "' is declared twice");
      if (t.from.empty()) refuse("event '" + t.event + "' has no from-state");
      for (const std::string& f : t.from) {
        if (!has_state(f)) refuse("event '" + t.event + "' names unknown state '" + f + "'");
      }
      if (!has_state(t.to)) refuse("event '" + t.event + "' leads to unknown state '" + t.to + "'");
    }
    // Reachability from the initial state.
    std::set<std::string, std::less<>> reached{initial_};
    for (bool grew = true; grew;) {
      grew = false;
      for (const Transition& t : transitions_) {
        if (reached.count(t.to) != 0) continue;
        for (const std::string& f : t.from) {
          if (reached.count(f) != 0) {
            reached.insert(t.to);
            grew = true;
            break;
          }
        }
      }
    }
    for (const std::string& s : states_) {
      if (reached.count(s) == 0) {
        refuse("state '" + s + "' is unreachable from initial state '" + initial_ + "'");
      }
    }
  }

  std::string initial_;
  std::vector<std::string> states_;
  std::vector<Transition> transitions_;
};

}  // namespace idem
