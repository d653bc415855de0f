#pragma once
// redacted_uri(): a connection URI with its password shown as "***", for messages (logs).

#include <string>
#include <string_view>

namespace idem::detail {

/// What user-info without a ':' holds: Redis reads redis://secret@host as a password, libpq
/// reads postgresql://app@host as a user name.
enum class LoneUserInfo { password, user };

inline std::string redacted_uri(std::string_view uri, LoneUserInfo lone) {
  const auto scheme_end = uri.find("://");
  if (scheme_end == std::string_view::npos) return std::string(uri);
  const auto info_begin = scheme_end + 3;
  const auto at = uri.find('@', info_begin);
  if (at == std::string_view::npos) return std::string(uri);
  const auto colon = uri.substr(info_begin, at - info_begin).find(':');
  if (colon == std::string_view::npos && lone == LoneUserInfo::user) return std::string(uri);
  const auto secret_begin = colon == std::string_view::npos ? info_begin : info_begin + colon + 1;
  std::string out(uri.substr(0, secret_begin));
  out.append("***").append(uri.substr(at));
  return out;
}

}  // namespace idem::detail
