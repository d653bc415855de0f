#include "hop_by_hop.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

namespace idem::proxy {

namespace {

using idem::http::equals_ignoring_case;

constexpr std::array<std::string_view, 8> kConnectionFields{
    "Connection",        "Keep-Alive", "TE",   "Trailer",
    "Transfer-Encoding", "Upgrade",    "Date", "Content-Length"};

bool starts_with_ignoring_case(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && equals_ignoring_case(s.substr(0, prefix.size()), prefix);
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The field names a Connection field lists (comma-separated tokens).
std::vector<std::string_view> named_by_connection(const Headers& headers) {
  std::vector<std::string_view> names;
  for (const auto& [name, value] : headers) {
    if (!equals_ignoring_case(name, "Connection")) continue;
    std::string_view rest = value;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const std::string_view token = trimmed(rest.substr(0, comma));
      if (!token.empty()) names.push_back(token);
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
  }
  return names;
}

}  // namespace

Headers end_to_end(const Headers& headers) {
  const std::vector<std::string_view> named = named_by_connection(headers);
  Headers out;
  out.reserve(headers.size());
  for (const auto& field : headers) {
    const std::string_view name = field.first;
    const auto is = [name](std::string_view other) { return equals_ignoring_case(name, other); };
    if (std::any_of(kConnectionFields.begin(), kConnectionFields.end(), is) ||
        std::any_of(named.begin(), named.end(), is) || starts_with_ignoring_case(name, "Proxy-")) {
      continue;
    }
    out.push_back(field);
  }
  return out;
}

Headers without(Headers headers, std::string_view name) {
  std::erase_if(headers,
                [name](const auto& field) { return equals_ignoring_case(field.first, name); });
  return headers;
}

}  // namespace idem::proxy
