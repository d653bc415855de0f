#pragma once
// RedisTokenStore: the one-time token strategy on Redis: token records in Redis
// (detail::RedisTokenRecords) and the guard that claims through them, in the compiled adapter
// idem::redis.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "idem/engine/guarded_records.hpp"
#include "idem/engine/token.hpp"
#include "idem/guard.hpp"
#include "idem/options.hpp"
#include "idem/redis/client.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"
#include "idem/store_stats.hpp"

namespace idem {

namespace detail {

/// The record store under RedisTokenStore, over effective keys (the scope is the caller's):
/// add() stores a pending token, the claim script consumes it (a key never added, or expired,
/// is errc::token_invalid), abort returns it to pending until its own expiry, and commit and
/// extend are the record store's scripts (a consumed token is a record with the same fields).
/// Thread-safe.
class RedisTokenRecords {
 public:
  RedisTokenRecords(std::shared_ptr<redis::Client> client, std::string prefix,
                    redis::Durability durability);
  RedisTokenRecords(const RedisTokenRecords&) = delete;
  RedisTokenRecords& operator=(const RedisTokenRecords&) = delete;

  /// `key` pending for `ttl` (SET NX PX, one round trip): false when the key is already taken.
  Result<bool> add(std::string_view key, std::chrono::milliseconds ttl);
  /// The Redis key of effective key `key`.
  std::string redis_key(std::string_view key) const;
  std::uint64_t replication_timeouts() const noexcept {
    return replication_timeouts_.load(std::memory_order_relaxed);
  }
  /// The client's figures (redis::Client::stats()) and this store's replication_timeouts().
  StoreStats stats() const {
    StoreStats out = client_->stats();
    if (auto* redis = out.parts.get<RedisStats>())
      redis->replication_timeouts = replication_timeouts();
    return out;
  }

  Result<Claim> claim(const ClaimRequest& request);
  Status commit(const Ticket& ticket, const Completion& completion);
  Status abort(const Ticket& ticket);
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease);
  /// RedisStore::await_change on the token's record: commit and abort wake the waiters.
  void await_change(const Ticket& held, std::chrono::milliseconds bound);

 private:
  std::shared_ptr<redis::Client> client_;
  std::string prefix_;
  redis::Durability durability_;
  std::atomic<std::uint64_t> replication_timeouts_{0};
};

static_assert(WakingStore<RedisTokenRecords>);

}  // namespace detail

struct RedisTokenStoreOptions {
  /// Prepended to every token's Redis key (default "idem:token:").
  std::string prefix = "idem:token:";
  /// The guard behind execute(): its scope names the token namespace (unset: "token"), and its
  /// lease, ttl (how long a consumed token replays), in-progress policy and observer apply.
  /// Fields left unset keep these defaults (idem::Options).
  Options guard{};
  /// Optional WAIT for replicas after a consuming claim and after a commit (default off).
  redis::Durability durability{};
};

/// One-time tokens in Redis. issue(ttl) draws 128 bits from the OS CSPRNG and stores the token
/// pending with `SET key T NX PX ttl`; execute(token, fn) consumes it: the claim script turns
/// pending into in progress atomically, fn runs once, and a repeat of the same request replays
/// its result. Unknown, expired, malformed or forged tokens, and a token used by a request with
/// another payload, are errc::token_invalid; the same request while the first still runs is
/// errc::in_progress (or waits, under Options::in_progress = Wait{...}). If fn throws, the token
/// returns to pending until its own expiry, so the client may retry with it.
///
/// Keys: `<prefix>{<16 hex digits>}<effective key>`, as RedisStore. Cost: issue is one SET;
/// execute is one claim and one commit script (a replay one claim), like the record store.
///
/// It is the token records plus an IdempotencyGuard over them; the scope is the guard's alone.
/// Also an idem::Store over the guard's effective keys (it forwards to the records), so it can
/// be a TokenLayer of a LayeredGuard. Thread-safe.
class RedisTokenStore : public detail::TokenFront<detail::RedisTokenRecords> {
 public:
  /// What the guard options' unset fields become (idem::Options).
  static constexpr OptionDefaults kDefaults{.scope = "token"};

  /// Throws std::invalid_argument when the guard options are out of range.
  explicit RedisTokenStore(std::shared_ptr<redis::Client> client,
                           RedisTokenStoreOptions options = {});
  ~RedisTokenStore();

  /// A new pending token, valid for `ttl` (at least 1 ms) until consumed. One round trip.
  Result<std::string> issue(std::chrono::milliseconds ttl);

  // execute(token[, payload], fn), begin<T>(token[, payload]), options() and the idem::Store
  // members come from detail::TokenFront.

  /// The Redis key of `token`.
  std::string token_key(std::string_view token) const;
  std::uint64_t replication_timeouts() const noexcept { return records_.replication_timeouts(); }
  /// Its figures: its client's (shared with the client's other stores) and its
  /// replication_timeouts().
  StoreStats stats() const { return records_.stats(); }
};

static_assert(Store<RedisTokenStore>);

}  // namespace idem
