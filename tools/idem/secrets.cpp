#include "secrets.hpp"

#include <cctype>
#include <fstream>

namespace idem::cli {

namespace {

bool starts_with_any(std::string_view s, std::initializer_list<std::string_view> prefixes) {
  for (std::string_view p : prefixes) {
    if (s.starts_with(p)) return true;
  }
  return false;
}

// The user-info of scheme://user-info@host..., or nullopt when there is none.
std::optional<std::string_view> user_info(std::string_view uri) {
  const auto begin = uri.find("://");
  if (begin == std::string_view::npos) return std::nullopt;
  const std::string_view rest = uri.substr(begin + 3);
  const auto end = rest.find_first_of("/?#");
  const std::string_view authority = rest.substr(0, end);
  const auto at = authority.rfind('@');
  if (at == std::string_view::npos) return std::nullopt;
  return authority.substr(0, at);
}

// Whether `text` has `key=` at its start or after one of `separators`.
bool has_parameter(std::string_view text, std::string_view key, std::string_view separators) {
  for (auto pos = text.find(key); pos != std::string_view::npos; pos = text.find(key, pos + 1)) {
    if (pos == 0 || separators.find(text[pos - 1]) != std::string_view::npos) {
      std::size_t after = pos + key.size();
      while (after < text.size() && text[after] == ' ') ++after;
      if (after < text.size() && text[after] == '=') return true;
    }
  }
  return false;
}

}  // namespace

bool has_password(std::string_view uri) {
  if (starts_with_any(
          uri, {"redis://", "rediss://", "redis+cluster://", "rediss+cluster://", "unix://"})) {
    const auto info = user_info(uri);
    if (!info || info->empty()) return false;
    const auto colon = info->find(':');
    // Redis reads a lone user-info as the password.
    return colon == std::string_view::npos || colon + 1 < info->size();
  }
  if (uri.find("://") == std::string_view::npos) {
    return uri.find('=') != std::string_view::npos &&
           has_parameter(uri, "password", " \t\n");  // libpq's key=value form
  }
  // Any other scheme (an unknown one too): user:password@, or libpq's ?password=.
  if (const auto info = user_info(uri)) {
    const auto colon = info->find(':');
    if (colon != std::string_view::npos && colon + 1 < info->size()) return true;
  }
  const auto query = uri.find('?');
  return query != std::string_view::npos && has_parameter(uri.substr(query + 1), "password", "&");
}

std::optional<std::string> read_password_file(const std::string& path, std::string& error) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) {
    error = "cannot read the password file '" + path + "'";
    return std::nullopt;
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.empty()) {
    error = "the password file '" + path + "' has an empty first line";
    return std::nullopt;
  }
  return line;
}

std::string scheme_of(std::string_view uri) {
  const auto end = uri.find(':');
  if (end == std::string_view::npos) return "";
  for (char c : uri.substr(0, end)) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '+' && c != '-' && c != '.') {
      return "";
    }
  }
  return std::string(uri.substr(0, end));
}

}  // namespace idem::cli
