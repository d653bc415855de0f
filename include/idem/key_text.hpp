#pragma once
// The rule for a key a client sends as text (HTTP Idempotency-Key, gRPC metadata): spaces and
// tabs around it are not part of it, since HTTP/1.1 parsers strip them and HTTP/2 forbids them.

#include <string_view>

namespace idem {

/// `value` without leading and trailing spaces and tabs; empty when it holds nothing else.
constexpr std::string_view key_text(std::string_view value) noexcept {
  auto blank = [](char c) { return c == ' ' || c == '\t'; };
  while (!value.empty() && blank(value.front())) value.remove_prefix(1);
  while (!value.empty() && blank(value.back())) value.remove_suffix(1);
  return value;
}

}  // namespace idem
