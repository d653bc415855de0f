#pragma once
// RequestIdCache: the gateway's request-ID response cache on Redis: entries in Redis
// (detail::RedisRequestIdRecords) and the guard that claims through them, in the compiled adapter
// idem::redis. The memory twin is MemoryRequestIdCache (idem/memory/request_id_cache.hpp).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "idem/engine/guarded_records.hpp"
#include "idem/guard.hpp"
#include "idem/key.hpp"
#include "idem/options.hpp"
#include "idem/redis/client.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"
#include "idem/store_stats.hpp"

namespace idem {

namespace detail {

/// The record store under RequestIdCache, over effective keys (the scope is the caller's): one
/// Redis string per key, claimed by a SET NX PX of an in-progress marker with a random holder id
/// (the fence), replaced by the response at commit; the cache_*.lua scripts. Thread-safe.
class RedisRequestIdRecords {
 public:
  /// Throws std::runtime_error when the OS has no random source for the holder ids.
  RedisRequestIdRecords(std::shared_ptr<redis::Client> client, std::string prefix);
  RedisRequestIdRecords(const RedisRequestIdRecords&) = delete;
  RedisRequestIdRecords& operator=(const RedisRequestIdRecords&) = delete;

  /// The Redis key of effective key `key`.
  std::string redis_key(std::string_view key) const;

  Result<Claim> claim(const ClaimRequest& request);
  Status commit(const Ticket& ticket, const Completion& completion);
  Status abort(const Ticket& ticket);
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease);
  /// Waits for the end of the hold `held` (idem::WakingStore), as RedisStore::await_change: the
  /// waiter counts itself in (cache_wait.lua), then blocks (BLPOP, on a connection of
  /// ConnectionOptions::wait_connections) until the commit or abort pushes its wake, or `bound`
  /// passes. A takeover after the marker's lease ran out does not wake: the bound, which the
  /// guard cuts at the lease's end, does.
  void await_change(const Ticket& held, std::chrono::milliseconds bound);

  /// The client's figures (redis::Client::stats()).
  StoreStats stats() const { return client_->stats(); }

 private:
  std::shared_ptr<redis::Client> client_;
  std::string prefix_;
  std::uint64_t holder_base_ = 0;
  std::atomic<std::uint64_t> holder_next_{0};
};

static_assert(WakingStore<RedisRequestIdRecords>);

}  // namespace detail

struct RequestIdCacheOptions {
  /// Prepended to every entry's Redis key (default "idem:req:").
  std::string prefix = "idem:req:";
  /// The guard behind execute(): scope (unset: "request-id"), lease (how long an in-progress
  /// marker holds the request id), ttl (how long the response is replayed; unset: 10 min),
  /// in-progress policy and observer. Fields left unset keep these defaults (idem::Options).
  Options guard{};
};

/// The first line of a gateway: per (principal, request id) the first request is forwarded and
/// its response kept for ttl; repeats get that response without reaching the service.
///
/// One Redis string per entry, `<prefix>{<16 hex digits>}<effective key>`. The claim is a SET NX
/// PX of an in-progress marker inside one script, so of two concurrent duplicates exactly one is
/// forwarded; the other gets errc::in_progress (or waits for the response under
/// Options::in_progress = Wait{...}). The marker expires with the lease, so a crashed holder's
/// request id frees itself (and a holder that outlives its lease, taken over or not, commits
/// nothing: lease_lost); commit replaces the holder's own marker by the response with PX ttl.
/// A repeat with another payload is errc::payload_mismatch.
///
/// Holder ids (the fences) are random 64-bit values, unique per claim, not counters. Size is
/// bounded by the server: give Redis a maxmemory and a volatile-* eviction policy (entries always
/// carry a TTL); the server counts evictions (INFO stats, evicted_keys).
///
/// Cost: a fresh request is one claim and one commit script; a repeat one claim. Thread-safe.
///
/// It is those entries plus an IdempotencyGuard over them; the scope is the guard's alone. Also
/// an idem::Store over the guard's effective keys (it forwards to the entries), so it can be a
/// RequestIdLayer of a LayeredGuard.
class RequestIdCache : public detail::RequestIdFront<detail::RedisRequestIdRecords> {
 public:
  /// What the guard options' unset fields become (idem::Options).
  static constexpr OptionDefaults kDefaults{.scope = "request-id", .ttl = std::chrono::minutes{10}};

  /// Throws std::invalid_argument when the guard options are out of range.
  explicit RequestIdCache(std::shared_ptr<redis::Client> client,
                          RequestIdCacheOptions options = {});
  ~RequestIdCache();

  // execute(request[, payload], fn) (fn produces the response: bytes or any codable type),
  // begin<T>(request[, payload]), options() and the idem::Store members come from
  // detail::RequestIdFront.

  /// The Redis key of a request id.
  std::string entry_key(const Key& request) const;
  /// Its figures: its client's (redis::Client::stats()), shared with the client's other stores.
  StoreStats stats() const { return records_.stats(); }
};

static_assert(WakingStore<RequestIdCache>);

}  // namespace idem
