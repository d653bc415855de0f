// RedisTokenStore: issue with SET NX PX, consume with token_claim.lua, and the record scripts
// for commit and extend (a consumed token is a record with the same fields).

#include <fmt/format.h>

#include "idem/engine/effective_key.hpp"
#include "idem/redis/token_store.hpp"
#include "lua_scripts.hpp"
#include "store_common.hpp"

namespace idem {

namespace detail {

RedisTokenRecords::RedisTokenRecords(std::shared_ptr<redis::Client> client, std::string prefix,
                                     redis::Durability durability)
    : client_(client ? std::move(client) : std::make_shared<redis::Client>()),
      prefix_(std::move(prefix)),
      durability_(std::move(durability)) {}

std::string RedisTokenRecords::redis_key(std::string_view key) const {
  return redis::tagged_key(prefix_, key);
}

Result<bool> RedisTokenRecords::add(std::string_view key, std::chrono::milliseconds ttl) {
  const std::string tagged = redis_key(key);
  redis::DecimalText ms;
  const std::string_view issued(&detail::redis_state::issued, 1);
  const std::array<std::string_view, 6> argv{"SET", tagged, issued,
                                             "NX",  "PX",   redis::ms_text(ms, ttl)};
  Result<redis::Answer> answer = impl_of(*client_).command(tagged, argv);
  if (!answer) return std::move(answer).failure();
  const redisReply& r = *answer->reply;
  if (r.type == REDIS_REPLY_ERROR)
    return redis::error_reply_failure(r, "issuing a token", answer->where);
  return r.type == REDIS_REPLY_STATUS;  // OK; nil means the key was taken
}

namespace {
// token_claim.lua's own codes: an unknown token, a token consumed with another payload.
Result<Claim> token_codes(Result<Claim> claim, redis::RedisClaimReply code) {
  using redis::RedisClaimReply;
  if (!claim) return claim;
  if (code == RedisClaimReply::token_unknown) {
    return make_failure(errc::token_invalid, "token is unknown or expired");
  }
  if (code == RedisClaimReply::token_mismatch || claim->status == ClaimStatus::mismatch) {
    return make_failure(errc::token_invalid, "token was used by a request with another payload");
  }
  return claim;
}
}  // namespace

Result<Claim> RedisTokenRecords::claim(const ClaimRequest& request) {
  return redis::eval_claim(impl_of(*client_), redis::script_token_claim, redis_key(request.key),
                           request, token_codes, {durability_, replication_timeouts_});
}

Status RedisTokenRecords::commit(const Ticket& ticket, const Completion& completion) {
  return redis::eval_record_commit(impl_of(*client_), redis::script_record_commit,
                                   redis_key(ticket.key), ticket.fence, completion,
                                   {durability_, replication_timeouts_});
}

Status RedisTokenRecords::abort(const Ticket& ticket) {
  return redis::eval_record_abort(impl_of(*client_), redis::script_token_abort,
                                  redis_key(ticket.key), ticket.fence);
}

Status RedisTokenRecords::extend(const Ticket& ticket, std::chrono::milliseconds lease) {
  return redis::eval_record_extend(impl_of(*client_), redis::script_record_extend,
                                   redis_key(ticket.key), ticket.fence, lease);
}

void RedisTokenRecords::await_change(const Ticket& held, std::chrono::milliseconds bound) {
  redis::await_change(impl_of(*client_), redis_key(held.key), held.fence, bound);
}

}  // namespace detail

RedisTokenStore::RedisTokenStore(std::shared_ptr<redis::Client> client,
                                 RedisTokenStoreOptions options)
    : TokenFront(with_defaults(std::move(options.guard), kDefaults), std::move(client),
                 std::move(options.prefix), std::move(options.durability)) {}

RedisTokenStore::~RedisTokenStore() = default;

std::string RedisTokenStore::token_key(std::string_view token) const {
  return records_.redis_key(detail::EffectiveKey(options().scope, {}, token).view());
}

Result<std::string> RedisTokenStore::issue(std::chrono::milliseconds ttl) {
  // 128 random bits never collide in practice; a taken key (NX refused) is tried once more.
  for (int attempt = 0; attempt < 2; ++attempt) {
    Result<std::string> token = detail::random_token();
    if (!token) return token;
    Result<bool> added =
        records_.add(detail::EffectiveKey(options().scope, {}, token.value()).view(), ttl);
    if (!added) return std::move(added).failure();
    if (added.value()) return token;
  }
  return make_failure(errc::store_unavailable, "could not store a fresh token (key taken twice)");
}

}  // namespace idem
