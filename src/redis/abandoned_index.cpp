// RedisStore's index of kept requests: key names and members (abandoned_index.hpp).

#include "abandoned_index.hpp"

#include "store_common.hpp"

namespace idem::redis {

std::optional<std::string_view> scope_part(std::string_view key) noexcept {
  std::size_t pos = 0;
  std::size_t n = 0;
  for (unsigned shift = 0;; shift += 7) {
    if (shift > 63 || pos >= key.size()) return std::nullopt;
    const auto byte = static_cast<unsigned char>(key[pos++]);
    n |= static_cast<std::size_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) break;
  }
  if (n > key.size() - pos) return std::nullopt;
  return key.substr(0, pos + n);
}

std::string abandoned_index_key(std::string_view prefix, std::string_view scope) {
  constexpr std::string_view kTag = "abandoned:";
  std::string key = tagged_key(prefix, scope);  // prefix {16 hex} scope
  key.insert(prefix.size() + 1, kTag);
  return key;
}

std::string index_member(std::string_view effective_key, Fence fence) {
  std::string member(effective_key);
  for (int shift = 56; shift >= 0; shift -= 8) {
    member.push_back(static_cast<char>((fence >> shift) & 0xff));
  }
  return member;
}

bool read_index_member(std::string_view member, std::string_view& effective_key, Fence& fence) {
  if (member.size() < 8) return false;
  effective_key = member.substr(0, member.size() - 8);
  fence = 0;
  for (std::size_t i = member.size() - 8; i < member.size(); ++i) {
    fence = fence << 8 | static_cast<unsigned char>(member[i]);
  }
  return true;
}

std::string lex_from(std::string_view prefix) {
  std::string bound = "[";
  bound.append(prefix);
  return bound;
}

std::string lex_past(std::string_view prefix) {
  std::string past(prefix);
  while (!past.empty() && static_cast<unsigned char>(past.back()) == 0xff) past.pop_back();
  if (past.empty()) return "+";
  past.back() = static_cast<char>(static_cast<unsigned char>(past.back()) + 1);
  return "(" + past;
}

}  // namespace idem::redis
