#include "transport/request_head.hpp"

#include <charconv>

namespace transport {

namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool same_name(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::size_t head_end(std::string_view bytes) {
  const std::size_t blank = bytes.find("\r\n\r\n");
  return blank == std::string_view::npos ? blank : blank + 4;
}

std::optional<std::string_view> header_value(std::string_view head, std::string_view name) {
  std::size_t line = head.find("\r\n");  // past the request line
  while (line != std::string_view::npos && line + 2 < head.size()) {
    const std::size_t start = line + 2;
    const std::size_t end = head.find("\r\n", start);
    if (end == std::string_view::npos || end == start) break;
    const std::string_view field = head.substr(start, end - start);
    const std::size_t colon = field.find(':');
    if (colon != std::string_view::npos && same_name(field.substr(0, colon), name)) {
      return trim(field.substr(colon + 1));
    }
    line = end;
  }
  return std::nullopt;
}

std::size_t body_to_wait_for(std::string_view head, std::size_t at_most) {
  if (header_value(head, "Expect") || header_value(head, "Transfer-Encoding")) return 0;
  const std::optional<std::string_view> length = header_value(head, "Content-Length");
  if (!length) return 0;
  std::size_t n = 0;
  const auto [end, ec] = std::from_chars(length->data(), length->data() + length->size(), n);
  if (ec != std::errc{} || end != length->data() + length->size() || n > at_most) return 0;
  return n;
}

}  // namespace transport
