// Reading an ACL refusal in a Redis error reply (acl_refusal.hpp).

#include "acl_refusal.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <vector>

#include "admin_scripts.hpp"
#include "lua_scripts.hpp"

namespace idem::redis {

namespace {

constexpr std::string_view kScriptCommand = "The user executing the script can't run";
constexpr std::string_view kScriptKey = "The user executing the script can't access";
// NOPERM's words for a key outside the user's patterns: "no permissions to access one of the
// keys" (Redis 7.0), "No permissions to access a key" (later releases).
constexpr std::string_view kKeyAccess = "ermissions to access";

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string sha1_hex(std::string_view bytes) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest.data(), &size, EVP_sha1(), nullptr) != 1) {
    return {};
  }
  static constexpr std::string_view kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < size; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 15]);
  }
  return out;
}

struct KnownScript {
  std::string sha;
  std::string_view source;
};

// Every script idem sends: the embedded ones (EVALSHA, or EVAL when the server lacks them) and
// the admin's (EVAL of their source, which Redis names by its SHA1 too).
const std::vector<KnownScript>& known_scripts() {
  static const std::vector<KnownScript> scripts = [] {
    std::vector<KnownScript> out;
    out.reserve(embedded_scripts.size() + 3);
    for (const Script* s : embedded_scripts) out.push_back({std::string(s->sha), s->source});
    for (const std::string_view source :
         {std::string_view(admin_scripts::kRead), std::string_view(admin_scripts::kRelease),
          std::string_view(admin_scripts::kScan)}) {
      out.push_back({sha1_hex(source), source});
    }
    return out;
  }();
  return scripts;
}

// Line `line` (from 1) of `source`.
std::string_view line_of(std::string_view source, std::size_t line) {
  for (std::size_t n = 1; n < line; ++n) {
    const std::size_t end = source.find('\n');
    if (end == std::string_view::npos) return {};
    source.remove_prefix(end + 1);
  }
  return source.substr(0, source.find('\n'));
}

// The commands `redis.call('X'` (or pcall) on `line`, as rights: "+x", or "one of +x, +y" when
// the line runs several; empty when it runs none.
std::string called_commands(std::string_view line) {
  std::vector<std::string> found;
  for (std::size_t at = 0; (at = line.find("call('", at)) != std::string_view::npos;) {
    at += 6;
    const std::string right = "+" + lower(line.substr(at, line.find('\'', at) - at));
    if (std::find(found.begin(), found.end(), right) == found.end()) found.push_back(right);
  }
  if (found.size() <= 1) return found.empty() ? std::string{} : found.front();
  std::string out = "one of " + found.front();
  for (std::size_t i = 1; i < found.size(); ++i) out += ", " + found[i];
  return out;
}

// The rights the script line an error reply names needs ("script: <sha>, on @user_script:<n>.").
std::string command_in_script(std::string_view error) {
  const std::size_t sha_at = error.find("script: ");
  const std::size_t line_at = error.find("@user_script:");
  if (sha_at == std::string_view::npos || line_at == std::string_view::npos) return {};
  const std::string_view sha = error.substr(sha_at + 8, 40);
  const std::string_view digits = error.substr(line_at + 13);
  std::size_t line = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), line);
  for (const KnownScript& s : known_scripts()) {
    if (s.sha == sha) return called_commands(line_of(s.source, line));
  }
  return {};
}

}  // namespace

std::optional<std::string> acl_refusal(std::string_view error) {
  if (error.find(kScriptKey) != std::string_view::npos ||
      (error.find("NOPERM") != std::string_view::npos &&
       error.find(kKeyAccess) != std::string_view::npos &&
       error.find(" key") != std::string_view::npos)) {
    return std::string("a key pattern (~<prefix>*) that covers the store's keys");
  }
  if (error.find(kScriptCommand) != std::string_view::npos) {
    std::string rights = command_in_script(error);
    if (rights.empty()) return std::string("a command the script runs");
    return rights;
  }
  if (error.find("NOPERM") == std::string_view::npos) return std::nullopt;
  // NOPERM this user has no permissions to run the 'cluster|slots' command
  const std::size_t open = error.find('\'');
  const std::size_t close = open == std::string_view::npos ? open : error.find('\'', open + 1);
  if (close == std::string_view::npos) return std::string("a command idem sends");
  return "+" + lower(error.substr(open + 1, close - open - 1));
}

}  // namespace idem::redis
