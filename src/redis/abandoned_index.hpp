#pragma once
// RedisStore's index of kept requests (idem::CompletableStore): one sorted set per scope, so
// that find_abandoned() reads a scope's runs in flight without scanning the keyspace. Its key
// has a hash tag of its own (a Cluster puts it on one node; the records stay on theirs); its
// members name a record and the fence its request was kept under. Internal to idem_redis.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client_impl.hpp"
#include "idem/result.hpp"
#include "idem/steps.hpp"
#include "idem/store.hpp"

namespace idem::redis {

/// record_find_abandoned.lua's answers for one record.
enum class IndexEntry : long long { stale = 0, live = 1, abandoned = 2 };

/// The scope at the start of an effective key (detail::EffectiveKey: its LEB128 length, then its
/// bytes), or of a find_abandoned() prefix that names a whole scope; nullopt when the bytes end
/// before it does.
std::optional<std::string_view> scope_part(std::string_view key) noexcept;

/// `<prefix>{abandoned:<16 hex digits of XXH3-64(scope)>}<scope>`: never a record's key, whose
/// tag is 16 hex digits alone (nor one the admin's record scans match).
std::string abandoned_index_key(std::string_view prefix, std::string_view scope);

/// An entry: the effective key, then the fence as 8 bytes, big-endian. Every member of a scope
/// starts with the scope's bytes, so a prefix is one lexicographic range (all scores are 0).
std::string index_member(std::string_view effective_key, Fence fence);

/// An entry's effective key and fence; false when the member is shorter than a fence.
bool read_index_member(std::string_view member, std::string_view& effective_key, Fence& fence);

/// ZRANGEBYLEX bounds of every member that starts with `prefix`: "[prefix" and the first string
/// past all of them ("(" and the prefix with its last byte below 0xff raised; "+" if none).
std::string lex_from(std::string_view prefix);
std::string lex_past(std::string_view prefix);

/// The length of "{abandoned:" 16 hex digits "}" between a store's prefix and the scope.
inline constexpr std::size_t kIndexTagSize = 1 + 10 + 16 + 1;

/// Reads the entries of `index` under `prefix` in pages, checks their records (of the store
/// whose key prefix is `store_prefix`) with record_find_abandoned.lua and drops the stale
/// entries. Collects up to `limit` abandoned runs into `found`; without `found`, walks the whole
/// range. Returns how many entries it dropped. RedisStore::find_abandoned and the admin's purge.
Result<std::size_t> walk_abandoned_index(Client::Impl& client, std::string_view store_prefix,
                                         std::string_view index, std::string_view prefix,
                                         std::size_t limit, std::vector<Abandoned>* found);

}  // namespace idem::redis
