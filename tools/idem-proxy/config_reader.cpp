#include "config_reader.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <utility>

namespace idem::proxy::config {

std::string where_of(const toml::source_region& source, std::string_view fallback) {
  if (source.path == nullptr || source.path->empty() || source.begin.line == 0) {
    return std::string(fallback);
  }
  return *source.path + ':' + std::to_string(source.begin.line) + ':' +
         std::to_string(source.begin.column);
}

std::vector<std::pair<const toml::key*, const toml::node*>> entries_in_order(
    const toml::table& table) {
  std::vector<std::pair<const toml::key*, const toml::node*>> entries;
  entries.reserve(table.size());
  for (auto&& [key, node] : table) entries.emplace_back(&key, &node);
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.first->source().begin < b.first->source().begin;
  });
  return entries;
}

std::string mistake_line(std::string_view where, std::string_view field, std::string_view what,
                         std::string_view allowed) {
  std::string line(where);
  line += ": ";
  if (!field.empty()) {
    line += field;
    line += ": ";
  }
  line += what;
  if (!allowed.empty()) {
    line += " (";
    line += allowed;
    line += ')';
  }
  return line;
}

std::string quoted_text(std::string_view text) {
  constexpr std::size_t kShown = 60;
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (i == kShown) {
      out += "...";
      break;
    }
    const char ch = text[i];
    const auto byte = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (byte >= 0x20 && byte < 0x7f) {
      out += ch;
    } else {
      std::array<char, 5> escaped{};
      std::snprintf(escaped.data(), escaped.size(), "\\x%02X", static_cast<unsigned>(byte));
      out += escaped.data();
    }
  }
  out += '"';
  return out;
}

std::string_view kind_name(toml::node_type type) {
  switch (type) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

ValueReader::ValueReader(const toml::node& node, std::string field, std::string_view fallback_where,
                         std::vector<std::string>& mistakes)
    : node_(node),
      field_(std::move(field)),
      where_(where_of(node.source(), fallback_where)),
      fallback_where_(fallback_where),
      mistakes_(mistakes) {}

ValueReader ValueReader::part(const toml::node& node, std::string field) const {
  return {node, std::move(field), fallback_where_, mistakes_};
}

void ValueReader::mistake(std::string_view what, std::string_view allowed) const {
  mistakes_.push_back(mistake_line(where_, field_, what, allowed));
}

void ValueReader::wrong_kind(std::string_view wanted, std::string_view allowed) const {
  std::string what(kind_name(node_.type()));
  what += ", where ";
  what += wanted;
  what += " is wanted";
  mistake(what, allowed);
}

bool ValueReader::integer_in(std::int64_t& out, std::int64_t min, std::int64_t max,
                             std::string_view unit) const {
  std::string allowed(unit);
  if (!allowed.empty()) allowed += ", ";
  allowed += std::to_string(min) + " to " + std::to_string(max);
  const toml::value<std::int64_t>* value = node_.as_integer();
  if (value == nullptr) {
    wrong_kind("an integer", allowed);
    return false;
  }
  if (value->get() < min || value->get() > max) {
    mistake(std::to_string(value->get()) + " is out of range", allowed);
    return false;
  }
  out = value->get();
  return true;
}

bool ValueReader::integer(int& out, std::int64_t min, std::int64_t max) {
  std::int64_t value = 0;
  if (!integer_in(value, min, max, "")) return false;
  out = static_cast<int>(value);
  return true;
}

bool ValueReader::count(std::size_t& out, std::int64_t max) {
  std::int64_t value = 0;
  if (!integer_in(value, 1, max, "")) return false;
  out = static_cast<std::size_t>(value);
  return true;
}

bool ValueReader::duration(std::chrono::milliseconds& out, std::int64_t min, std::int64_t max) {
  std::int64_t value = 0;
  if (!integer_in(value, min, max, "milliseconds")) return false;
  out = std::chrono::milliseconds(value);
  return true;
}

bool ValueReader::duration(std::chrono::seconds& out, std::int64_t min, std::int64_t max) {
  std::int64_t value = 0;
  if (!integer_in(value, min, max, "seconds")) return false;
  out = std::chrono::seconds(value);
  return true;
}

bool ValueReader::text(std::string& out, const TextRule& rule) {
  const toml::value<std::string>* value = node_.as_string();
  if (value == nullptr) {
    wrong_kind("a string", rule.allowed);
    return false;
  }
  if (!rule.accepts(value->get())) {
    mistake(quoted_text(value->get()) + " is not valid", rule.allowed);
    return false;
  }
  out = value->get();
  return true;
}

bool ValueReader::texts(std::vector<std::string>& out, const TextRule& rule) {
  const toml::array* array = node_.as_array();
  if (array == nullptr) {
    wrong_kind("an array of strings", rule.allowed);
    return false;
  }
  std::vector<std::string> values;
  bool all_valid = true;
  for (std::size_t i = 0; i < array->size(); ++i) {
    ValueReader element = part(*array->get(i), field_ + '[' + std::to_string(i) + ']');
    std::string value;
    if (element.text(value, rule)) {
      values.push_back(std::move(value));
    } else {
      all_valid = false;
    }
  }
  if (all_valid) out = std::move(values);
  return all_valid;
}

}  // namespace idem::proxy::config
