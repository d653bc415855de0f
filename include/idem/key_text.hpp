#pragma once
// The rule for a key a client sends as text, shared by every protocol idem reads keys from (the
// HTTP Idempotency-Key field, gRPC's idempotency-key metadata): spaces and tabs around the key
// are not part of it. HTTP/1.1 parsers strip them around a field value (RFC 9112 section 5),
// and HTTP/2, gRPC's transport, forbids them (RFC 9113 section 8.2.1), so no client can mean
// them: " k", "k " and "k" are one key, and a value of only blanks is no key.

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
