#pragma once
// What an HTTP field value may hold (RFC 9110 section 5.5): visible ASCII, obs-text, spaces and
// tabs. A NUL, CR, LF, other control byte or DEL makes the whole request malformed (400): a
// value cut at a NUL could make two keys one.

#include <string_view>

namespace idem::http {

/// True when every byte of `value` may appear in a field value.
constexpr bool valid_field_value(std::string_view value) noexcept {
  for (const char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) return false;
  }
  return true;
}

}  // namespace idem::http
