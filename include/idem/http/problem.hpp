#pragma once
// What an HTTP service answers when an idempotent call has no value to send: the status, an RFC
// 9457 problem+json body and Retry-After where a retry can succeed (docs/http.md).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "idem/error.hpp"
#include "idem/outcome.hpp"

namespace idem::http {

inline constexpr std::string_view kProblemContentType = "application/problem+json";

/// An RFC 9457 problem document; `type` is a URI reference naming the kind of problem.
struct Problem {
  std::string type = "about:blank";
  std::string title{};
  int status = 500;
  std::string detail{};    // left out of the body when empty
  std::string instance{};  // left out of the body when empty
};

namespace detail {

/// The length of the well-formed UTF-8 sequence (RFC 3629: no overlong forms, no surrogates,
/// nothing above U+10FFFF) that starts `s`, or 0 when `s` does not start with one.
inline std::size_t utf8_sequence(std::string_view s) noexcept {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(0);
  std::size_t n = 0;
  unsigned char low = 0x80;  // the second byte's range, narrowed for the lead bytes that need it
  unsigned char high = 0xbf;
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) {
    n = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    n = 3;
    if (lead == 0xe0) low = 0xa0;   // overlong
    if (lead == 0xed) high = 0x9f;  // surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    n = 4;
    if (lead == 0xf0) low = 0x90;   // overlong
    if (lead == 0xf4) high = 0x8f;  // above U+10FFFF
  } else {
    return 0;
  }
  if (s.size() < n || byte(1) < low || byte(1) > high) return 0;
  for (std::size_t i = 2; i < n; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
  }
  return n;
}

}  // namespace detail

/// `s` as a JSON string, quotes included: always valid JSON. Each byte that is not part of a
/// well-formed UTF-8 sequence becomes U+FFFD (RFC 8259 requires UTF-8 text).
inline std::string json_string(std::string_view s) {
  constexpr std::string_view kHex = "0123456789abcdef";
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) {
      const std::size_t n = detail::utf8_sequence(s.substr(i));
      if (n == 0) {
        out += "\xef\xbf\xbd";
        ++i;
      } else {
        out.append(s.substr(i, n));
        i += n;
      }
      continue;
    }
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += "\\u00";
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 0xf]);
    } else {
      out.push_back(c);
    }
    ++i;
  }
  out.push_back('"');
  return out;
}

/// The problem as application/problem+json.
inline std::string problem_json(const Problem& p) {
  std::string out = "{\"type\":" + json_string(p.type) + ",\"title\":" + json_string(p.title) +
                    ",\"status\":" + std::to_string(p.status);
  if (!p.detail.empty()) out += ",\"detail\":" + json_string(p.detail);
  if (!p.instance.empty()) out += ",\"instance\":" + json_string(p.instance);
  out.push_back('}');
  return out;
}

/// How problem_for names problems.
struct ProblemStyle {
  /// The problem's type is this and the error's name: a URN, or a documentation base URL.
  std::string type_base = "urn:idem:problem:";
  std::string instance{};  ///< each problem's instance (the request's path, say); empty: none
};

/// The problem for an error code: status from idem::http_status(), title from the code's
/// message, type from the code's name ("error" for codes outside idem::errc).
inline Problem problem_of(std::error_code e, std::string detail, const ProblemStyle& style = {}) {
  const std::string name = e.category() == error_category()
                               ? std::string(to_string(static_cast<errc>(e.value())))
                               : std::string("error");
  return Problem{style.type_base + name, e.message(), http_status(e), std::move(detail),
                 style.instance};
}

/// Retry-After in seconds for a wait of `wait`: rounded up, at least 1.
inline std::int64_t retry_after_seconds(std::chrono::milliseconds wait) noexcept {
  const std::int64_t ms = wait.count();
  return ms > 1000 ? (ms + 999) / 1000 : 1;
}

/// The error an HTTP service answers for `out`, or an empty code when out.value() is the answer:
/// out.error() (lease_lost too), or a fresh value whose commit failed in a way a retry settles
/// (store_unavailable, outcome_unknown): its effects may have been rolled back with the commit.
template <class T>
std::error_code answer_error(const Outcome<T>& out) noexcept {
  if (!out) return out.error();
  if (out.executed() && !out.recorded() && is_retryable(out.commit_error())) {
    return out.commit_error();
  }
  return {};
}

/// The HTTP status for `out`: `success` when out.value() is the answer, else the error's.
template <class T>
int status_of(const Outcome<T>& out, int success = 200) noexcept {
  const std::error_code e = answer_error(out);
  return e ? http_status(e) : success;
}

/// Retry-After (seconds) for `out`: none when a retry cannot succeed; for a key in flight, the
/// holder's lease left rounded up (the earliest takeover); otherwise 1.
template <class T>
std::optional<std::int64_t> retry_after_of(const Outcome<T>& out) noexcept {
  const std::error_code e = answer_error(out);
  if (!e || !is_retryable(e)) return std::nullopt;
  return retry_after_seconds(out ? std::chrono::milliseconds{0} : out.retry_after());
}

/// An error answer: status, problem+json body, and Retry-After where a retry helps.
struct ProblemResponse {
  int status = 500;
  std::string body;
  std::optional<std::int64_t> retry_after;
};

/// The answer for `out` when it is an error (see answer_error), or nullopt when out.value() is.
template <class T>
std::optional<ProblemResponse> problem_for(const Outcome<T>& out, const ProblemStyle& style = {}) {
  const std::error_code e = answer_error(out);
  if (!e) return std::nullopt;
  const std::string detail = out ? out.commit_failure().describe() : out.message();
  const Problem p = problem_of(e, detail, style);
  return ProblemResponse{p.status, problem_json(p), retry_after_of(out)};
}

}  // namespace idem::http
