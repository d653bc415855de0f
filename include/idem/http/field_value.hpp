#pragma once
// What an HTTP field value may hold (RFC 9110 section 5.5): visible ASCII, obs-text (bytes
// 0x80-0xff), spaces and tabs. A NUL, CR, LF, another control byte or DEL makes the whole request
// malformed: a service answers 400 and never reads the value up to that byte. (A framework that
// hands values over as C strings cuts them at a NUL: "X\0AAAA" and "X\0BBBB" would be one key,
// "Bearer mallory\0-not-alice" the principal mallory.)

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
