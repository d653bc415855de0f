// RequestIdCache: one Redis string per request id; the cache_*.lua scripts behind the Store calls.

#include "idem/redis/request_id_cache.hpp"

#include <fmt/format.h>

#include <array>
#include <cstring>

#include "idem/engine/effective_key.hpp"
#include "idem/engine/token.hpp"
#include "lua_scripts.hpp"
#include "store_common.hpp"

namespace idem {

namespace {

constexpr std::size_t kHeader = redis::kCacheEntryHeader;

void put_u64(char* out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(v >> (56 - 8 * i));
}
std::uint64_t get_u64(const char* in) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(in[i]);
  return v;
}

// A marker's state (held) and holder id: what commit, abort and extend compare against.
std::array<char, 9> holder_prefix(Fence fence) {
  std::array<char, 9> out{};
  out[0] = detail::redis_state::held;
  put_u64(out.data() + 1, fence);
  return out;
}

}  // namespace

namespace detail {

RedisRequestIdRecords::RedisRequestIdRecords(std::shared_ptr<redis::Client> client,
                                             std::string prefix)
    : client_(client ? std::move(client) : std::make_shared<redis::Client>()),
      prefix_(std::move(prefix)) {
  // Holder ids start at a random point so that processes sharing the server never meet.
  std::array<unsigned char, 8> seed;
  if (!os_random(seed.data(), seed.size()).ok()) {
    throw std::runtime_error("idem: no OS random source for RequestIdCache holder ids");
  }
  holder_base_ = get_u64(reinterpret_cast<const char*>(seed.data()));
}

std::string RedisRequestIdRecords::redis_key(std::string_view key) const {
  return redis::tagged_key(prefix_, key);
}

Result<Claim> RedisRequestIdRecords::claim(const ClaimRequest& request) {
  const std::string key = redis_key(request.key);
  Fence fence = holder_base_ + holder_next_.fetch_add(1, std::memory_order_relaxed);
  if (fence == 0) fence = 1;  // 0 means "no fence" to the guard's observer
  std::array<char, kHeader> marker{};
  const auto prefix = holder_prefix(fence);
  std::memcpy(marker.data(), prefix.data(), prefix.size());
  const auto fp = redis::fingerprint_bytes(request.fingerprint);
  std::memcpy(marker.data() + 9, fp.data(), fp.size());
  redis::DecimalText lease;
  const std::array<std::string_view, 2> args{std::string_view(marker.data(), marker.size()),
                                             redis::ms_text(lease, request.lease)};
  Result<redis::Answer> answer = impl_of(*client_).eval(redis::script_cache_claim, key, args);
  if (!answer) return std::move(answer).failure();
  return redis::decode_cache_claim(*answer->reply, fence, fp, answer->where);
}

Status RedisRequestIdRecords::commit(const Ticket& ticket, const Completion& completion) {
  const auto holder = holder_prefix(ticket.fence);
  redis::DecimalText ttl;
  const std::array<std::string_view, 4> args{
      std::string_view(holder.data(), holder.size()),
      detail::to_redis(detail::finished_state(completion.status)), completion.result,
      redis::ms_text(ttl, completion.ttl)};
  return redis::eval_commit(impl_of(*client_), redis::script_cache_commit, redis_key(ticket.key),
                            args);
}

Status RedisRequestIdRecords::abort(const Ticket& ticket) {
  const auto holder = holder_prefix(ticket.fence);
  const std::array<std::string_view, 1> args{std::string_view(holder.data(), holder.size())};
  return redis::eval_fenced(impl_of(*client_), redis::script_cache_abort, redis_key(ticket.key),
                            args, "abort");
}

Status RedisRequestIdRecords::extend(const Ticket& ticket, std::chrono::milliseconds lease) {
  const auto holder = holder_prefix(ticket.fence);
  redis::DecimalText ms;
  const std::array<std::string_view, 2> args{std::string_view(holder.data(), holder.size()),
                                             redis::ms_text(ms, lease)};
  return redis::eval_fenced(impl_of(*client_), redis::script_cache_extend, redis_key(ticket.key),
                            args, "extend");
}

void RedisRequestIdRecords::await_change(const Ticket& held, std::chrono::milliseconds bound) {
  const auto holder = holder_prefix(held.fence);
  redis::await_cache_change(impl_of(*client_), redis_key(held.key), held.fence,
                            std::string_view(holder.data(), holder.size()), bound);
}

}  // namespace detail

RequestIdCache::RequestIdCache(std::shared_ptr<redis::Client> client, RequestIdCacheOptions options)
    : RequestIdFront(with_defaults(std::move(options.guard), kDefaults), std::move(client),
                     std::move(options.prefix)) {}

RequestIdCache::~RequestIdCache() = default;

std::string RequestIdCache::entry_key(const Key& request) const {
  return records_.redis_key(
      detail::EffectiveKey(options().scope, request.principal, request.id).view());
}

}  // namespace idem
