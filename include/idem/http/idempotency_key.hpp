#pragma once
// The Idempotency-Key request header (IETF httpapi draft "The Idempotency-Key HTTP Header
// Field"): its value is an sf-string (RFC 8941 Structured Field Values), "..." with \" and \\ as
// its only escapes and printable ASCII inside, optionally followed by parameters, which the
// draft defines none of: they are checked for syntax and ignored. Many clients send the key
// bare (no quotes); KeyRules::accept_bare takes such a value as it is.
//
// The field is one sf-string: a request that carries it twice (two fields, whatever their
// values) has no key; parse_idempotency_key_fields() takes every value the request carries and
// refuses two. No HTTP framework is needed: hand in the values as the framework gives them.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "idem/detail/enum_names.hpp"
#include "idem/key_text.hpp"

namespace idem::http {

/// Why a header value is not an idempotency key.
enum class KeyRefusal : std::uint8_t {
  missing,        // no header, or a value of only spaces
  empty,          // "" : a string of no characters
  not_printable,  // a byte outside printable ASCII (0x20-0x7e)
  bad_escape,     // a backslash not followed by " or backslash
  unterminated,   // an opening quote without its closing one
  bad_parameter,  // what follows the string is not ;key[=value] parameters
  not_a_string,   // a bare value where only an sf-string is accepted
  too_long,       // more bytes of key than KeyRules::max_bytes
  repeated,       // more than one Idempotency-Key field: a list, not one key
};

namespace detail {
inline constexpr std::array<std::string_view, 9> kKeyRefusalTexts = {
    "Idempotency-Key is missing",
    "Idempotency-Key is an empty string",
    "Idempotency-Key holds a byte that is not printable ASCII",
    R"(Idempotency-Key has an escape other than \" or \\)",
    "Idempotency-Key has no closing quote",
    "Idempotency-Key is followed by something other than ;key=value parameters",
    "Idempotency-Key is not a quoted string",
    "Idempotency-Key is too long",
    "Idempotency-Key appears in more than one field: the key is one sf-string",
};
static_assert(kKeyRefusalTexts.size() == static_cast<std::size_t>(KeyRefusal::repeated) + 1);
}  // namespace detail

/// The refusal in words, fit for a problem+json title.
constexpr std::string_view describe(KeyRefusal r) noexcept {
  return idem::detail::name_in(detail::kKeyRefusalTexts, r, "Idempotency-Key is refused");
}

/// What parse_idempotency_key accepts.
struct KeyRules {
  /// Longest key in bytes (after unescaping). The guard's own limit is Options::max_key_size,
  /// which the guard's scope and principal share; keep this below it.
  std::size_t max_bytes = 255;
  /// A value that does not start with a quote is taken whole as the key (printable ASCII only).
  bool accept_bare = true;
};

/// The key, or why there is none.
class ParsedKey {
 public:
  static ParsedKey accepted(std::string key) { return ParsedKey(std::move(key), {}, true); }
  static ParsedKey refused(KeyRefusal why) { return ParsedKey({}, why, false); }

  bool ok() const noexcept { return ok_; }
  explicit operator bool() const noexcept { return ok_; }
  /// The key; empty when refused.
  const std::string& key() const noexcept { return key_; }
  std::string&& take_key() && noexcept { return std::move(key_); }
  /// Why the value was refused; meaningless when ok().
  KeyRefusal refusal() const noexcept { return refusal_; }
  /// The refusal in words; empty when ok().
  std::string_view reason() const noexcept { return ok_ ? std::string_view{} : describe(refusal_); }

 private:
  ParsedKey(std::string key, KeyRefusal why, bool ok)
      : key_(std::move(key)), refusal_(why), ok_(ok) {}
  std::string key_;
  KeyRefusal refusal_{};
  bool ok_ = true;
};

namespace detail {

constexpr bool printable(char c) noexcept { return c >= 0x20 && c <= 0x7e; }
constexpr bool lcalpha(char c) noexcept { return c >= 'a' && c <= 'z'; }
constexpr bool alpha(char c) noexcept { return lcalpha(c) || (c >= 'A' && c <= 'Z'); }
constexpr bool digit(char c) noexcept { return c >= '0' && c <= '9'; }
// RFC 9110 tchar.
constexpr bool tchar(char c) noexcept {
  return alpha(c) || digit(c) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}
constexpr bool base64(char c) noexcept {
  return alpha(c) || digit(c) || c == '+' || c == '/' || c == '=';
}

/// RFC 8941 sf-string from `at` (the opening quote) into `out`; `at` ends after the closing
/// quote. False with `why` set when it is not one.
inline bool parse_string(std::string_view s, std::size_t& at, std::string* out, KeyRefusal& why) {
  for (++at; at < s.size(); ++at) {
    char c = s[at];
    if (c == '"') {
      ++at;
      return true;
    }
    if (c == '\\') {
      if (++at == s.size()) break;  // a backslash where the closing quote should be
      c = s[at];
      if (c != '"' && c != '\\') {
        why = KeyRefusal::bad_escape;
        return false;
      }
    } else if (!printable(c)) {
      why = KeyRefusal::not_printable;
      return false;
    }
    if (out != nullptr) out->push_back(c);
  }
  why = KeyRefusal::unterminated;
  return false;
}

/// An RFC 8941 bare-item (integer, decimal, string, token, byte sequence, boolean) from `at`.
inline bool parse_bare_item(std::string_view s, std::size_t& at) {
  if (at == s.size()) return false;
  const char c = s[at];
  if (c == '"') {
    KeyRefusal ignored{};
    return parse_string(s, at, nullptr, ignored);
  }
  if (c == '?') {
    if (at + 1 < s.size() && (s[at + 1] == '0' || s[at + 1] == '1')) {
      at += 2;
      return true;
    }
    return false;
  }
  if (c == ':') {
    for (++at; at < s.size() && base64(s[at]); ++at) {
    }
    if (at == s.size() || s[at] != ':') return false;
    ++at;
    return true;
  }
  if (alpha(c) || c == '*') {
    for (++at; at < s.size() && (tchar(s[at]) || s[at] == ':' || s[at] == '/'); ++at) {
    }
    return true;
  }
  // Integer (at most 15 digits) or decimal (at most 12 digits, a dot, 1-3 digits).
  if (c == '-') ++at;
  std::size_t whole = 0;
  for (; at < s.size() && digit(s[at]); ++at) ++whole;
  if (whole == 0) return false;
  if (at < s.size() && s[at] == '.') {
    if (whole > 12) return false;
    std::size_t fraction = 0;
    for (++at; at < s.size() && digit(s[at]); ++at) ++fraction;
    return fraction >= 1 && fraction <= 3;
  }
  return whole <= 15;
}

/// RFC 8941 parameters: *( ";" *SP key [ "=" bare-item ] ), up to the end of `s`.
inline bool parse_parameters(std::string_view s, std::size_t at) {
  while (at < s.size()) {
    if (s[at] != ';') return false;
    for (++at; at < s.size() && s[at] == ' '; ++at) {
    }
    if (at == s.size() || !(lcalpha(s[at]) || s[at] == '*')) return false;
    for (++at; at < s.size(); ++at) {
      const char c = s[at];
      if (!(lcalpha(c) || digit(c) || c == '_' || c == '-' || c == '.' || c == '*')) break;
    }
    if (at < s.size() && s[at] == '=' && !parse_bare_item(s, ++at)) return false;
  }
  return true;
}

}  // namespace detail

/// The key an Idempotency-Key header value carries. Leading and trailing spaces and tabs are
/// ignored (idem::key_text, the rule gRPC keys follow too). A quoted value is an sf-string,
/// unescaped, with parameters after it checked and ignored ("k";p=1 is the key k). A bare value
/// (KeyRules::accept_bare) is the key as it is.
inline ParsedKey parse_idempotency_key(std::string_view value, const KeyRules& rules = {}) {
  value = key_text(value);
  if (value.empty()) return ParsedKey::refused(KeyRefusal::missing);

  std::string key;
  if (value.front() == '"') {
    std::size_t at = 0;
    KeyRefusal why{};
    if (!detail::parse_string(value, at, &key, why)) return ParsedKey::refused(why);
    if (!detail::parse_parameters(value, at)) return ParsedKey::refused(KeyRefusal::bad_parameter);
    if (key.empty()) return ParsedKey::refused(KeyRefusal::empty);
  } else {
    if (!rules.accept_bare) return ParsedKey::refused(KeyRefusal::not_a_string);
    for (const char c : value) {
      if (!detail::printable(c)) return ParsedKey::refused(KeyRefusal::not_printable);
    }
    key.assign(value);
  }
  if (key.size() > rules.max_bytes) return ParsedKey::refused(KeyRefusal::too_long);
  return ParsedKey::accepted(std::move(key));
}

/// The key of a request from every Idempotency-Key field value it carries (`values`: any range
/// of strings or string views, in the order received): none is KeyRefusal::missing, more than
/// one KeyRefusal::repeated (never the first of them: a proxy and the service could each pick
/// another), one is parse_idempotency_key(value).
template <class Values>
ParsedKey parse_idempotency_key_fields(const Values& values, const KeyRules& rules = {}) {
  std::string_view only;
  std::size_t count = 0;
  for (const auto& value : values) {
    if (++count > 1) return ParsedKey::refused(KeyRefusal::repeated);
    only = std::string_view(value);
  }
  return parse_idempotency_key(only, rules);
}

/// `key` as an sf-string: quoted, with " and backslash escaped. Parses back to `key` when the
/// key is printable ASCII.
inline std::string quote_key(std::string_view key) {
  std::string out = "\"";
  for (const char c : key) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

}  // namespace idem::http
