#pragma once
// Reading an ACL refusal in a Redis error reply: which right of docs/redis.md's ACL line the user
// lacks. Redis names the command a client sends (NOPERM ... 'evalsha'), but for a command a
// script runs it names only the script's SHA1 and line; the right is read from that line of the
// script, which idem knows (its embedded scripts and the admin's).

#include <optional>
#include <string>
#include <string_view>

namespace idem::redis {

/// The right `error` (an error reply's text) says the user lacks, as the ACL line grants it
/// ("+hset", "+cluster|slots", "~<prefix>* for the key"); nullopt when `error` is no ACL refusal.
std::optional<std::string> acl_refusal(std::string_view error);

}  // namespace idem::redis
