#pragma once
// The request and stored-answer parsing of the payments service, apart from httplib so that
// tests and fuzz targets can include it alone: the Idempotency-Key header, Authorization:
// Bearer, and the "<status>\n<body>" answer the service stores as its idempotent result.

#include <charconv>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace payments {

/// Longer keys are refused before they reach the guard (whose limit is 256 bytes).
inline constexpr std::size_t kMaxIdempotencyKey = 255;

/// An Idempotency-Key header value: the key, or why the value is not one.
struct IdempotencyKey {
  std::string key;
  std::string_view error;  // empty when `key` holds the key
  bool ok() const noexcept { return error.empty(); }
};

/// The draft's Idempotency-Key is an sf-string: "..." with \" and \\ as its only escapes and
/// printable ASCII inside. A bare value of printable ASCII is also taken, as it is: many
/// clients send one. Empty, control bytes, non-ASCII, a broken sf-string, or more than
/// kMaxIdempotencyKey bytes of key are refused.
inline IdempotencyKey parse_idempotency_key(std::string_view raw) {
  auto printable = [](char c) { return c >= 0x20 && c <= 0x7e; };
  auto refuse = [](std::string_view why) { return IdempotencyKey{{}, why}; };
  if (raw.empty()) return refuse("Idempotency-Key is missing");
  std::string key;
  if (raw.front() != '"') {
    for (char c : raw) {
      if (!printable(c)) return refuse("Idempotency-Key holds a byte that is not printable ASCII");
    }
    key.assign(raw);
  } else {
    std::size_t i = 1;
    for (; i < raw.size() && raw[i] != '"'; ++i) {
      char c = raw[i];
      if (c == '\\') {
        if (++i == raw.size() || (raw[i] != '"' && raw[i] != '\\')) {
          return refuse("Idempotency-Key has an escape other than \\\" or \\\\");
        }
        c = raw[i];
      } else if (!printable(c)) {
        return refuse("Idempotency-Key holds a byte that is not printable ASCII");
      }
      key.push_back(c);
    }
    if (i + 1 != raw.size()) return refuse("Idempotency-Key is not one quoted string");
    if (key.empty()) return refuse("Idempotency-Key is empty");
  }
  if (key.size() > kMaxIdempotencyKey) return refuse("Idempotency-Key is longer than 255 bytes");
  return IdempotencyKey{std::move(key), {}};
}

/// Authorization: Bearer <name> is the demo's whole authentication: the name is the principal.
inline std::optional<std::string> bearer_principal(std::string_view authorization) {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() <= kBearer.size() ||
      authorization.substr(0, kBearer.size()) != kBearer) {
    return std::nullopt;
  }
  return std::string(authorization.substr(kBearer.size()));
}

/// What the service stores as a payment's idempotent result: the HTTP status, then the body.
inline std::string format_stored_answer(int status, std::string_view body) {
  return std::to_string(status) + "\n" + std::string(body);
}

struct StoredAnswer {
  int status = 0;
  std::string_view body;
};

/// A stored result read back: nullopt unless it is three digits of a 2xx-5xx status, a newline,
/// then the body. The store may hold bytes the service never wrote.
inline std::optional<StoredAnswer> parse_stored_answer(std::string_view stored) {
  const auto newline = stored.find('\n');
  if (newline != 3) return std::nullopt;
  StoredAnswer out;
  const auto [end, ec] = std::from_chars(stored.data(), stored.data() + 3, out.status);
  if (ec != std::errc{} || end != stored.data() + 3 || out.status < 200 || out.status > 599) {
    return std::nullopt;
  }
  out.body = stored.substr(4);
  return out;
}

}  // namespace payments
