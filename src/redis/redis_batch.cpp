// RedisStore's batches: one script call (record_claim_batch.lua, record_commit_batch.lua) per
// group of keys that share a server. On one server that is the whole batch (in chunks of
// kMaxKeysPerCall); on a Cluster the keys are grouped by hash slot, one call per slot.

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "idem/redis/store.hpp"
#include "lua_scripts.hpp"
#include "store_common.hpp"

namespace idem {

namespace {

// A script call blocks its server while it runs: keep each one short.
constexpr std::size_t kMaxKeysPerCall = 256;

// The positions of `keys` in call groups: one slot each on a Cluster, at most kMaxKeysPerCall.
std::vector<std::vector<std::size_t>> call_groups(const std::vector<std::string>& keys,
                                                  bool cluster) {
  std::map<std::uint16_t, std::vector<std::size_t>> by_slot;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    by_slot[cluster ? redis::key_slot(keys[i]) : 0].push_back(i);
  }
  std::vector<std::vector<std::size_t>> groups;
  for (auto& [slot, members] : by_slot) {
    for (std::size_t at = 0; at < members.size(); at += kMaxKeysPerCall) {
      const auto end = members.begin() +
                       static_cast<std::ptrdiff_t>(std::min(members.size(), at + kMaxKeysPerCall));
      groups.emplace_back(members.begin() + static_cast<std::ptrdiff_t>(at), end);
    }
  }
  return groups;
}

// Whether a batch reply wrote something worth a WAIT: an acquired claim, a commit done.
bool any_of_elements(const redisReply& r, bool (*wrote)(const redisReply&)) {
  return r.type == REDIS_REPLY_ARRAY && std::any_of(r.element, r.element + r.elements,
                                                    [&](const redisReply* e) { return wrote(*e); });
}
bool any_acquired(const redisReply& r) { return any_of_elements(r, redis::claim_acquired); }
bool any_done(const redisReply& r) { return any_of_elements(r, redis::fenced_ok); }

Failure wrong_count(std::string_view where, std::size_t got, std::size_t sent) {
  return make_failure(
      errc::record_corrupt,
      fmt::format("redis {}: batch script answered {} of {} keys", where, got, sent));
}

}  // namespace

std::vector<Result<Claim>> RedisStore::claim_batch(std::span<const ClaimRequest> requests) {
  std::vector<std::string> keys;
  keys.reserve(requests.size());
  for (const ClaimRequest& r : requests) keys.push_back(record_key(r.key));
  std::vector<std::optional<Result<Claim>>> answers(requests.size());
  const redis::ReplicaWait wait{options_.durability, replication_timeouts_};

  for (const std::vector<std::size_t>& group : call_groups(keys, impl_of(*client_).is_cluster())) {
    std::vector<std::string_view> key_args;
    std::vector<std::array<char, 16>> fps;
    std::vector<redis::DecimalText> numbers(group.size() * 2);
    std::vector<std::string_view> args;
    key_args.reserve(group.size());
    fps.reserve(group.size());
    args.reserve(group.size() * 3);
    for (std::size_t g = 0; g < group.size(); ++g) {
      const ClaimRequest& r = requests[group[g]];
      if (r.key.empty()) {
        answers[group[g]] = make_failure(errc::key_invalid, "effective key is empty");
        continue;
      }
      key_args.push_back(keys[group[g]]);
      fps.push_back(redis::fingerprint_bytes(r.fingerprint));
      args.emplace_back(fps.back().data(), fps.back().size());
      args.push_back(redis::ms_text(numbers[2 * g], r.lease));
      args.push_back(redis::ms_text(numbers[2 * g + 1], r.retention));
    }
    if (key_args.empty()) continue;
    Result<redis::Answer> answer = impl_of(*client_).eval_keys(
        redis::script_record_claim_batch, key_args, args, &options_.durability, any_acquired);
    std::size_t k = 0;  // the reply's element of the next key sent
    for (const std::size_t i : group) {
      if (answers[i]) continue;  // refused before the call
      if (!answer) {
        answers[i] = answer.failure();
      } else if (const redisReply& r = *answer->reply;
                 r.type != REDIS_REPLY_ARRAY || r.elements != key_args.size()) {
        answers[i] = wrong_count(answer->where, r.type == REDIS_REPLY_ARRAY ? r.elements : 0,
                                 key_args.size());
      } else if (const redisReply& e = *r.element[k]; e.type == REDIS_REPLY_ERROR) {
        answers[i] = redis::error_reply_failure(e, "script record_claim_batch", answer->where);
      } else {
        redis::RedisClaimReply code{};
        answers[i] = redis::record_codes(redis::decode_claim(e, answer->where, code), code);
      }
      ++k;
    }
    if (answer) (void)wait.check(answer->acknowledged, "claim");
  }
  std::vector<Result<Claim>> out;
  out.reserve(answers.size());
  for (auto& a : answers) out.push_back(std::move(*a));
  return out;
}

std::vector<Status> RedisStore::commit_batch(std::span<const CommitRequest> requests) {
  std::vector<std::string> keys;
  keys.reserve(requests.size());
  for (const CommitRequest& r : requests) keys.push_back(record_key(r.ticket.key));
  std::vector<Status> answers(requests.size());
  const redis::ReplicaWait wait{options_.durability, replication_timeouts_};

  for (const std::vector<std::size_t>& group : call_groups(keys, impl_of(*client_).is_cluster())) {
    std::vector<std::string_view> key_args;
    std::vector<redis::DecimalText> numbers(group.size() * 2);
    std::vector<std::string_view> args;
    key_args.reserve(group.size());
    args.reserve(group.size() * 4);
    for (std::size_t g = 0; g < group.size(); ++g) {
      const CommitRequest& r = requests[group[g]];
      key_args.push_back(keys[group[g]]);
      args.push_back(redis::to_chars(numbers[2 * g], static_cast<std::int64_t>(r.ticket.fence)));
      args.push_back(detail::to_redis(detail::finished_state(r.completion.status)));
      args.push_back(r.completion.result);
      args.push_back(redis::ms_text(numbers[2 * g + 1], r.completion.ttl));
    }
    Result<redis::Answer> answer = impl_of(*client_).eval_keys(
        redis::script_record_commit_batch, key_args, args, &options_.durability, any_done,
        /*report_in_doubt=*/true);
    const bool short_wait = answer && !wait.check(answer->acknowledged, "commit");
    for (std::size_t g = 0; g < group.size(); ++g) {
      Status& status = answers[group[g]];
      if (!answer) {
        status = answer.failure();
        continue;
      }
      const redisReply& r = *answer->reply;
      if (r.type != REDIS_REPLY_ARRAY || r.elements != group.size()) {
        status =
            wrong_count(answer->where, r.type == REDIS_REPLY_ARRAY ? r.elements : 0, group.size());
        continue;
      }
      status = redis::decode_fenced(*r.element[g], answer->where, "commit");
      if (status.ok() && short_wait) {
        status = wait.unconfirmed(answer->where, "commit", answer->acknowledged);
      }
    }
  }
  return answers;
}

}  // namespace idem
