// RedisTokenStore: issue with SET NX PX, consume with token_claim.lua, and the record scripts
// for commit and extend (a consumed token is a record with the same fields).

#include "idem/stores/redis_token_store.hpp"

#include <fmt/format.h>

#include "idem/detail/effective_key.hpp"
#include "lua_scripts.hpp"
#include "store_common.hpp"

namespace idem {

using redis::Connection;
using redis::ReplyPtr;

RedisTokenStore::RedisTokenStore(std::shared_ptr<redis::Client> client,
                                 RedisTokenStoreOptions options)
    : client_(client ? std::move(client) : std::make_shared<redis::Client>()),
      prefix_(std::move(options.prefix)),
      scope_(options.guard.scope),
      durability_(std::move(options.durability)) {
  guard_.bind(*this, std::move(options.guard));
}

RedisTokenStore::~RedisTokenStore() = default;

std::string RedisTokenStore::token_key(std::string_view token) const {
  const detail::EffectiveKey key(scope_, {}, token);
  return redis::tagged_key(prefix_, key.view());
}

Result<std::string> RedisTokenStore::issue(std::chrono::milliseconds ttl) {
  // 128 random bits never collide in practice; a taken key (NX refused) is tried once more.
  for (int attempt = 0; attempt < 2; ++attempt) {
    Result<std::string> token = detail::random_token();
    if (!token) return token;
    const std::string key = token_key(token.value());
    char ms[24];
    const std::array<std::string_view, 6> argv{"SET", key,  "T",
                                               "NX",  "PX", redis::ms_text(ms, ttl)};
    Result<Connection> conn = client_->impl().acquire();
    if (!conn) return std::move(conn).failure();
    Result<ReplyPtr> reply = conn->command(argv);
    if (!reply) return std::move(reply).failure();
    const redisReply& r = *reply.value();
    if (r.type == REDIS_REPLY_ERROR) {
      return redis::error_reply_failure(r, "issuing a token", client_->impl().where());
    }
    if (r.type == REDIS_REPLY_STATUS) return token;  // OK; nil means the key was taken
  }
  return make_failure(errc::store_unavailable, "could not store a fresh token (key taken twice)");
}

Result<Claim> RedisTokenStore::claim(const ClaimRequest& request) {
  const std::string key = redis::tagged_key(prefix_, request.key);
  const auto fp = redis::fingerprint_bytes(request.fingerprint);
  char lease[24], retention[24];
  const std::array<std::string_view, 1> keys{key};
  const std::array<std::string_view, 3> args{std::string_view(fp.data(), fp.size()),
                                             redis::ms_text(lease, request.lease),
                                             redis::ms_text(retention, request.retention)};
  Result<Connection> conn = client_->impl().acquire();
  if (!conn) return std::move(conn).failure();
  Result<ReplyPtr> reply = conn->eval(redis::script_token_claim, keys, args);
  if (!reply) return std::move(reply).failure();
  int code = -1;
  Result<Claim> claim = redis::decode_claim(*reply.value(), client_->impl().where(), code);
  if (!claim) return claim;
  if (code == 5) return make_failure(errc::token_invalid, "token is unknown or expired");
  if (code == 6 || claim->status == ClaimStatus::mismatch) {
    return make_failure(errc::token_invalid, "token was used by a request with another payload");
  }
  if (claim->status == ClaimStatus::acquired && !conn->wait_for_replicas(durability_, "claim")) {
    replication_timeouts_.fetch_add(1, std::memory_order_relaxed);
  }
  return claim;
}

Status RedisTokenStore::commit(const Ticket& ticket, const Completion& completion) {
  const std::string key = redis::tagged_key(prefix_, ticket.key);
  char fence[24], ttl[24];
  const std::array<std::string_view, 1> keys{key};
  const std::array<std::string_view, 4> args{
      redis::to_chars(fence, static_cast<std::int64_t>(ticket.fence)),
      completion.status == ClaimStatus::failed ? "F" : "C", completion.result,
      redis::ms_text(ttl, completion.ttl)};
  Result<Connection> conn = client_->impl().acquire();
  if (!conn) return std::move(conn).failure();
  Status status = redis::decode_fenced(conn->eval(redis::script_record_commit, keys, args),
                                       client_->impl().where(), "commit");
  if (status.ok() && !conn->wait_for_replicas(durability_, "commit")) {
    replication_timeouts_.fetch_add(1, std::memory_order_relaxed);
  }
  return status;
}

Status RedisTokenStore::abort(const Ticket& ticket) {
  const std::string key = redis::tagged_key(prefix_, ticket.key);
  char fence[24];
  const std::array<std::string_view, 1> keys{key};
  const std::array<std::string_view, 1> args{
      redis::to_chars(fence, static_cast<std::int64_t>(ticket.fence))};
  Result<Connection> conn = client_->impl().acquire();
  if (!conn) return std::move(conn).failure();
  return redis::decode_fenced(conn->eval(redis::script_token_abort, keys, args),
                              client_->impl().where(), "abort");
}

Status RedisTokenStore::extend(const Ticket& ticket, std::chrono::milliseconds lease) {
  const std::string key = redis::tagged_key(prefix_, ticket.key);
  char fence[24], ms[24];
  const std::array<std::string_view, 1> keys{key};
  const std::array<std::string_view, 2> args{
      redis::to_chars(fence, static_cast<std::int64_t>(ticket.fence)), redis::ms_text(ms, lease)};
  Result<Connection> conn = client_->impl().acquire();
  if (!conn) return std::move(conn).failure();
  return redis::decode_fenced(conn->eval(redis::script_record_extend, keys, args),
                              client_->impl().where(), "extend");
}

}  // namespace idem
