// RedisStore: the record scripts (record_*.lua) behind the idem::Store calls.

#include "idem/stores/redis_store.hpp"

#include <fmt/format.h>

#include "lua_scripts.hpp"
#include "store_common.hpp"

namespace idem {

using redis::Connection;
using redis::ReplyPtr;

RedisStore::RedisStore(std::shared_ptr<redis::Client> client, RedisStoreOptions options)
    : client_(std::move(client)), options_(std::move(options)) {
  if (!client_) client_ = std::make_shared<redis::Client>();
}

std::string RedisStore::record_key(std::string_view effective_key) const {
  return redis::tagged_key(options_.prefix, effective_key);
}

Result<Claim> RedisStore::claim(const ClaimRequest& request) {
  const std::string key = record_key(request.key);
  const auto fp = redis::fingerprint_bytes(request.fingerprint);
  char lease[24], retention[24];
  const std::array<std::string_view, 1> keys{key};
  const std::array<std::string_view, 3> args{std::string_view(fp.data(), fp.size()),
                                             redis::ms_text(lease, request.lease),
                                             redis::ms_text(retention, request.retention)};
  Result<Connection> conn = client_->impl().acquire();
  if (!conn) return std::move(conn).failure();
  Result<ReplyPtr> reply = conn->eval(redis::script_record_claim, keys, args);
  if (!reply) return std::move(reply).failure();
  int code = -1;
  Result<Claim> claim = redis::decode_claim(*reply.value(), client_->impl().where(), code);
  if (claim && code >= 5) {
    return make_failure(errc::record_corrupt, "record claim script answered a token code");
  }
  if (claim && claim->status == ClaimStatus::acquired &&
      !conn->wait_for_replicas(options_.durability, "claim")) {
    replication_timeouts_.fetch_add(1, std::memory_order_relaxed);
  }
  return claim;
}

Status RedisStore::commit(const Ticket& ticket, const Completion& completion) {
  const std::string key = record_key(ticket.key);
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
  if (status.ok() && !conn->wait_for_replicas(options_.durability, "commit")) {
    replication_timeouts_.fetch_add(1, std::memory_order_relaxed);
  }
  return status;
}

Status RedisStore::abort(const Ticket& ticket) {
  const std::string key = record_key(ticket.key);
  char fence[24];
  const std::array<std::string_view, 1> keys{key};
  const std::array<std::string_view, 1> args{
      redis::to_chars(fence, static_cast<std::int64_t>(ticket.fence))};
  Result<Connection> conn = client_->impl().acquire();
  if (!conn) return std::move(conn).failure();
  return redis::decode_fenced(conn->eval(redis::script_record_abort, keys, args),
                              client_->impl().where(), "abort");
}

Status RedisStore::extend(const Ticket& ticket, std::chrono::milliseconds lease) {
  const std::string key = record_key(ticket.key);
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
