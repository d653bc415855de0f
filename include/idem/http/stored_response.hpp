#pragma once
// StoredResponse: an HTTP answer kept as a handler's result, so that a replay is the whole
// response; only allow-listed headers are kept (docs/http.md, with the stored form).

#include <algorithm>
#include <array>
#include <charconv>
#include <initializer_list>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "idem/codec.hpp"
#include "idem/error.hpp"

namespace idem::http {

/// The headers a stored response keeps by default: those that describe the result itself.
inline constexpr std::array<std::string_view, 6> kReplayedHeaders{
    "Content-Type", "Content-Location", "Location", "ETag", "Last-Modified", "Cache-Control"};

/// ASCII letters compared without regard to case (RFC 9110 header names, auth schemes).
constexpr bool equals_ignoring_case(std::string_view a, std::string_view b) noexcept {
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [&](char x, char y) { return lower(x) == lower(y); });
}

struct StoredResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  /// The first value of header `name`, or empty.
  std::string_view header(std::string_view name) const noexcept {
    for (const auto& [n, v] : headers) {
      if (equals_ignoring_case(n, name)) return v;
    }
    return {};
  }
  friend bool operator==(const StoredResponse&, const StoredResponse&) = default;
};

/// A response to store: `status`, `body`, and those of `headers` (any range of name/value
/// pairs, such as a framework's header map) whose name is on `allow`.
template <class Headers, class Allow = decltype(kReplayedHeaders)>
StoredResponse keep_response(int status, std::string body, const Headers& headers,
                             const Allow& allow = kReplayedHeaders) {
  StoredResponse out{status, {}, std::move(body)};
  for (const auto& header : headers) {
    const std::string_view name = std::get<0>(header);
    const bool allowed = std::any_of(std::begin(allow), std::end(allow), [name](const auto& a) {
      return equals_ignoring_case(name, std::string_view(a));
    });
    if (allowed) out.headers.emplace_back(std::string(name), std::string(std::get<1>(header)));
  }
  return out;
}

namespace detail {

inline constexpr std::string_view kStoredResponseTag = "idem-http/1 ";

constexpr bool header_name_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}
constexpr bool header_value_char(char c) noexcept { return c != '\n' && c != '\r' && c != '\0'; }

inline bool valid_header(std::string_view name, std::string_view value) noexcept {
  return !name.empty() && std::all_of(name.begin(), name.end(), header_name_char) &&
         std::all_of(value.begin(), value.end(), header_value_char);
}

}  // namespace detail

}  // namespace idem::http

namespace idem {

template <>
struct codec<http::StoredResponse> {
  /// Throws idem::Error(record_corrupt) for what could not be read back: a status outside
  /// 100-599, a header name that is not an HTTP token, a value holding CR, LF or NUL.
  static std::string encode(const http::StoredResponse& r) {
    if (r.status < 100 || r.status > 599) {
      detail::corrupt("a stored HTTP response needs a status from 100 to 599");
    }
    std::string out(http::detail::kStoredResponseTag);
    out += std::to_string(r.status);
    out.push_back('\n');
    for (const auto& [name, value] : r.headers) {
      if (!http::detail::valid_header(name, value)) {
        detail::corrupt(
            "a stored HTTP header needs a token name and a value without CR, LF or NUL");
      }
      out += name;
      out += ": ";
      out += value;
      out.push_back('\n');
    }
    out.push_back('\n');
    out += r.body;
    return out;
  }

  static http::StoredResponse decode(std::string_view bytes) {
    auto line = [&bytes]() {
      const auto end = bytes.find('\n');
      if (end == std::string_view::npos) detail::corrupt("stored HTTP response is cut short");
      const std::string_view l = bytes.substr(0, end);
      bytes.remove_prefix(end + 1);
      return l;
    };
    const std::string_view tag = http::detail::kStoredResponseTag;
    if (bytes.substr(0, tag.size()) != tag) detail::corrupt("not a stored HTTP response");
    bytes.remove_prefix(tag.size());
    const std::string_view status = line();
    http::StoredResponse r;
    const auto [end, ec] = std::from_chars(status.data(), status.data() + status.size(), r.status);
    if (status.size() != 3 || ec != std::errc{} || end != status.data() + 3 || r.status < 100 ||
        r.status > 599) {
      detail::corrupt("stored HTTP response has no three-digit status");
    }
    for (std::string_view h = line(); !h.empty(); h = line()) {
      const auto colon = h.find(": ");
      if (colon == std::string_view::npos) detail::corrupt("stored HTTP header has no ': '");
      const std::string_view name = h.substr(0, colon);
      const std::string_view value = h.substr(colon + 2);
      if (!http::detail::valid_header(name, value))
        detail::corrupt("stored HTTP header is malformed");
      r.headers.emplace_back(name, value);
    }
    r.body.assign(bytes);
    return r;
  }
};

}  // namespace idem
