// RedisStore as an idem::CompletableStore: keep_request() (an index entry, then
// record_keep_request.lua under the fence) and find_abandoned() (the scope's index read in
// pages, each page's records checked by record_find_abandoned.lua, stale entries dropped).

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "abandoned_index.hpp"
#include "idem/redis/store.hpp"
#include "lua_scripts.hpp"
#include "store_common.hpp"

namespace idem {

namespace {

// Index entries read, and records checked, per round: a script call blocks its server while it
// runs, so each stays short.
constexpr std::size_t kPage = 256;

Failure not_a_scope(std::string_view what) {
  return make_failure(errc::key_invalid,
                      fmt::format("RedisStore indexes kept requests by scope: the {} does not "
                                  "start with a whole scope (a length, then its bytes)",
                                  what));
}

// A command on the index's server; an error reply is a failure.
Result<redis::Answer> index_command(redis::Client::Impl& client, std::string_view index,
                                    std::span<const std::string_view> argv,
                                    std::string_view doing) {
  Result<redis::Answer> answer = client.command(index, argv);
  if (answer && answer->reply->type == REDIS_REPLY_ERROR) {
    return redis::error_reply_failure(*answer->reply, doing, answer->where);
  }
  return answer;
}

// One entry of a page: where it came from in the index and what it names.
struct Candidate {
  std::string member;
  std::string record;    // the record's Redis key
  std::string_view key;  // the effective key, inside `member`
  redis::DecimalText fence{};
  std::string_view fence_text;
};

}  // namespace

std::string RedisStore::abandoned_index_key(std::string_view effective_key) const {
  const std::optional<std::string_view> scope = redis::scope_part(effective_key);
  return scope ? redis::abandoned_index_key(options_.prefix, *scope) : std::string{};
}

Status RedisStore::keep_request(const Ticket& ticket, std::string_view request) {
  constexpr std::string_view doing = "keep_request";
  const std::string index = abandoned_index_key(ticket.key);
  if (index.empty()) return not_a_scope("key");
  const std::string member = redis::index_member(ticket.key, ticket.fence);
  const std::string record = record_key(ticket.key);
  redis::DecimalText fence;
  const std::string_view fence_text =
      redis::to_chars(fence, static_cast<std::int64_t>(ticket.fence));
  redis::Client::Impl& client = impl_of(*client_);
  if (!client.is_cluster()) {
    // One server: the entry and the request in one script, both or neither.
    const std::array<std::string_view, 2> keys{record, index};
    const std::array<std::string_view, 3> args{fence_text, request, member};
    Result<redis::Answer> answer = client.eval_keys(redis::script_record_keep_request, keys, args);
    if (!answer) return std::move(answer).failure();
    return redis::decode_fenced(*answer->reply, answer->where, doing);
  }
  // A Cluster: the index is in another slot. The entry first: a request kept is always in the
  // index; an entry whose request never came (a crash between the calls, a lost lease) is
  // dropped by find_abandoned().
  const std::array<std::string_view, 4> zadd{"ZADD", index, "0", member};
  Result<redis::Answer> added =
      index_command(client, index, zadd, "ZADD to the index of kept requests");
  if (!added) return std::move(added).failure();
  const std::array<std::string_view, 2> args{fence_text, request};
  return redis::eval_fenced(client, redis::script_record_keep_request, record, args, doing);
}

Result<std::vector<Abandoned>> RedisStore::find_abandoned(std::string_view prefix,
                                                          std::size_t limit) {
  const std::string index = abandoned_index_key(prefix);
  if (index.empty()) return not_a_scope("prefix");
  std::vector<Abandoned> found;
  if (limit == 0) return found;
  Result<std::size_t> walked =
      redis::walk_abandoned_index(impl_of(*client_), options_.prefix, index, prefix, limit, &found);
  if (!walked) return std::move(walked).failure();
  return found;
}

namespace redis {

Result<std::size_t> walk_abandoned_index(Client::Impl& client, std::string_view store_prefix,
                                         std::string_view index, std::string_view prefix,
                                         std::size_t limit, std::vector<Abandoned>* found) {
  const bool cluster = client.is_cluster();
  const std::string page_size = std::to_string(kPage);
  const std::string past = lex_past(prefix);
  std::string from = lex_from(prefix);
  std::size_t dropped = 0;
  while (found == nullptr || found->size() < limit) {
    const std::array<std::string_view, 7> range{"ZRANGEBYLEX", index, from,     past,
                                                "LIMIT",       "0",   page_size};
    Result<Answer> page = index_command(client, index, range, "ZRANGEBYLEX");
    if (!page) return std::move(page).failure();
    const redisReply& listed = *page->reply;
    if (listed.type != REDIS_REPLY_ARRAY) return unexpected_reply(page->where, "ZRANGEBYLEX");
    std::vector<Candidate> candidates;
    std::vector<std::string> stale;
    candidates.reserve(listed.elements);
    for (std::size_t i = 0; i < listed.elements; ++i) {
      const redisReply& e = *listed.element[i];
      if (e.type != REDIS_REPLY_STRING) return unexpected_reply(page->where, "ZRANGEBYLEX");
      // Filled in place: its views point into itself, and `candidates` never reallocates.
      Candidate& c = candidates.emplace_back();
      c.member.assign(e.str, e.len);
      Fence fence = 0;
      if (!read_index_member(c.member, c.key, fence)) {
        stale.push_back(std::move(c.member));  // not an entry idem writes
        candidates.pop_back();
        continue;
      }
      c.record = tagged_key(store_prefix, c.key);
      c.fence_text = to_chars(c.fence, static_cast<std::int64_t>(fence));
    }
    // The records, one script call per server (on a Cluster: per hash slot).
    std::map<std::uint16_t, std::vector<std::size_t>> groups;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      groups[cluster ? key_slot(candidates[i].record) : 0].push_back(i);
    }
    for (const auto& [slot, members] : groups) {
      std::vector<std::string_view> keys;
      std::vector<std::string_view> args;
      for (const std::size_t i : members) {
        keys.push_back(candidates[i].record);
        args.push_back(candidates[i].fence_text);
      }
      DecimalText wanted;  // at most a page's worth, whatever `limit` is
      const std::size_t want = found == nullptr ? 0 : std::min(limit - found->size(), kPage);
      args.push_back(to_chars(wanted, static_cast<std::int64_t>(want)));
      Result<Answer> checked = client.eval_keys(script_record_find_abandoned, keys, args);
      if (!checked) return std::move(checked).failure();
      const redisReply& r = *checked->reply;
      if (r.type != REDIS_REPLY_ARRAY || r.elements != members.size()) {
        return unexpected_reply(checked->where, "find_abandoned");
      }
      for (std::size_t k = 0; k < members.size(); ++k) {
        const redisReply& e = *r.element[k];
        if (e.type != REDIS_REPLY_ARRAY || e.elements < 1 ||
            e.element[0]->type != REDIS_REPLY_INTEGER) {
          return unexpected_reply(checked->where, "find_abandoned");
        }
        Candidate& c = candidates[members[k]];
        switch (static_cast<IndexEntry>(e.element[0]->integer)) {
          case IndexEntry::stale:
            stale.push_back(c.member);
            break;
          case IndexEntry::live:
            break;
          case IndexEntry::abandoned:
            if (e.elements != 2 || e.element[1]->type != REDIS_REPLY_STRING) {
              return unexpected_reply(checked->where, "find_abandoned");
            }
            if (found != nullptr && found->size() < limit) {
              found->push_back(Abandoned{std::string(c.key), std::string(text(*e.element[1]))});
            }
            break;
          default:
            return unexpected_reply(checked->where, "find_abandoned");
        }
      }
    }
    // Entries no keep can make valid again go: the index stays as large as the runs in flight.
    if (!stale.empty()) {
      std::vector<std::string_view> zrem{"ZREM", index};
      zrem.insert(zrem.end(), stale.begin(), stale.end());
      Result<Answer> removed = index_command(client, index, zrem, "ZREM");
      if (!removed) return std::move(removed).failure();
      dropped += stale.size();
    }
    if (listed.elements < kPage) break;
    from = "(";
    from.append(listed.element[listed.elements - 1]->str, listed.element[listed.elements - 1]->len);
  }
  return dropped;
}

}  // namespace redis

}  // namespace idem
