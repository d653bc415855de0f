#pragma once
// One value of idem-proxy's configuration, a TOML node, read into a ProxyConfig field: each typed
// read checks the value's kind and range, and otherwise adds the line of one mistake,
// "WHERE: field: what is wrong (what is allowed)" (config_file.hpp), leaving the field as it was.

#include <toml++/toml.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace idem::proxy::config {

/// "FILE:LINE:COL" of a node read from a file; `fallback` (the option that set it, or the file
/// name) for one that has no place in a file.
std::string where_of(const toml::source_region& source, std::string_view fallback);

/// The line of one mistake: "WHERE: FIELD: WHAT (ALLOWED)"; no field: "WHERE: WHAT (ALLOWED)".
std::string mistake_line(std::string_view where, std::string_view field, std::string_view what,
                         std::string_view allowed);

/// `text` in double quotes for a message, bytes that are not printable ASCII as \xNN, cut after
/// 60 bytes (a config value may come from anywhere; a message must not carry control bytes).
std::string quoted_text(std::string_view text);

/// "a string", "an integer", ...: the kind of a TOML value, for messages.
std::string_view kind_name(toml::node_type type);

/// A table's fields in the order the file has them (a table iterates in the order of its names),
/// so that mistakes are said top to bottom.
std::vector<std::pair<const toml::key*, const toml::node*>> entries_in_order(
    const toml::table& table);

/// What strings a text field takes.
struct TextRule {
  bool (*accepts)(std::string_view value);
  std::string_view allowed;  // what the mistake's parentheses say
};

/// One name of an enumeration as the config file spells it.
template <class E>
struct Choice {
  std::string_view name;
  E value;
};

class ValueReader {
 public:
  /// `fallback_where` is what mistakes cite when the node has no place in a file.
  ValueReader(const toml::node& node, std::string field, std::string_view fallback_where,
              std::vector<std::string>& mistakes);

  const toml::node& node() const { return node_; }
  const std::string& field() const { return field_; }
  const std::string& where() const { return where_; }

  /// A reader of `node`, a part of this value (an array's element, an inline table's field),
  /// named `field`.
  ValueReader part(const toml::node& node, std::string field) const;

  /// Each read sets `out` and returns true when the value is of its kind and in its range, and
  /// otherwise adds a mistake and leaves `out` alone.
  bool integer(int& out, std::int64_t min, std::int64_t max);
  /// 1 to `max`.
  bool count(std::size_t& out, std::int64_t max);
  bool duration(std::chrono::milliseconds& out, std::int64_t min, std::int64_t max);
  bool duration(std::chrono::seconds& out, std::int64_t min, std::int64_t max);
  bool text(std::string& out, const TextRule& rule);
  /// An array of strings, each of which `rule` accepts.
  bool texts(std::vector<std::string>& out, const TextRule& rule);

  template <class E>
  bool choice(E& out, std::initializer_list<Choice<E>> choices) {
    std::string allowed;
    std::size_t i = 0;
    for (const Choice<E>& c : choices) {
      if (i > 0) allowed += i + 1 == choices.size() ? " or " : ", ";
      allowed += '"' + std::string(c.name) + '"';
      ++i;
    }
    const toml::value<std::string>* value = node_.as_string();
    if (value == nullptr) {
      wrong_kind("a string", allowed);
      return false;
    }
    for (const Choice<E>& c : choices) {
      if (value->get() == c.name) {
        out = c.value;
        return true;
      }
    }
    mistake(quoted_text(value->get()) + " is not one of the choices", allowed);
    return false;
  }

  /// Adds a mistake about this value.
  void mistake(std::string_view what, std::string_view allowed) const;
  /// Adds a mistake's whole line (about a name inside this value, for instance).
  void add_line(std::string line) const { mistakes_.push_back(std::move(line)); }
  /// Adds "KIND, where WANTED is wanted (ALLOWED)".
  void wrong_kind(std::string_view wanted, std::string_view allowed) const;

 private:
  /// The value when it is an integer from `min` to `max`; else adds a mistake whose
  /// parentheses say `unit` and the range.
  bool integer_in(std::int64_t& out, std::int64_t min, std::int64_t max,
                  std::string_view unit) const;

  const toml::node& node_;
  std::string field_;
  std::string where_;
  std::string fallback_where_;
  std::vector<std::string>& mistakes_;
};

}  // namespace idem::proxy::config
