#pragma once
// RedisStore: the unique-index record strategy on Redis (docs/design.md §12), in the compiled
// adapter idem::redis. Claim, commit, abort and extend are each one Lua script called with
// EVALSHA.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "idem/batch_store.hpp"
#include "idem/redis/client.hpp"
#include "idem/result.hpp"
#include "idem/steps.hpp"
#include "idem/store.hpp"
#include "idem/store_stats.hpp"

namespace idem {

struct RedisStoreOptions {
  /// Prepended to every record's Redis key (default "idem:"); give each application its own.
  std::string prefix = "idem:";
  /// Optional WAIT for replicas after a claim that acquired and after a commit (default off).
  redis::Durability durability{};
};

/// Records in Redis, one hash per effective key. The key's name is
/// `<prefix>{<16 hex digits of the key's XXH3>}<the effective key's bytes>`: the hash tag puts
/// every key of a record in one cluster slot, and the raw bytes after it keep keys exact (no
/// two effective keys share a record). Leases and expiry use the server's clock (TIME inside
/// the scripts); retention is a PEXPIRE in the same script, never a separate command.
///
/// Cost: claim, commit, abort and extend are one EVALSHA round trip each (plus one WAIT when
/// durability asks). Thread-safe; shares the client's connection pool.
class RedisStore {
 public:
  static constexpr std::string_view kStoreName = "redis";  // observers' label
  explicit RedisStore(std::shared_ptr<redis::Client> client, RedisStoreOptions options = {});

  Result<Claim> claim(const ClaimRequest& request);
  Status commit(const Ticket& ticket, const Completion& completion);
  /// Releases the record, keeping its fence (the record is never deleted on abort).
  Status abort(const Ticket& ticket);
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease);
  /// Waits for the end of the hold `held` (idem::WakingStore): the waiter counts itself in the
  /// record (one script, which finds a hold already over and returns at once), then blocks on
  /// the hold's wake list (BLPOP, on a connection of its own: ConnectionOptions::
  /// wait_connections) until the commit or abort script pushes its wake, or `bound` passes. One
  /// round trip; never longer than `bound` and a short slack (at most 100 ms); a server out of
  /// reach or refusing makes it a pause of `bound`.
  void await_change(const Ticket& held, std::chrono::milliseconds bound);

  /// Batches (idem::BatchStore): one script call for all the keys on one server (a Cluster's
  /// keys grouped by hash slot, one call per slot), each key answered as claim() or commit()
  /// would answer it alone.
  std::vector<Result<Claim>> claim_batch(std::span<const ClaimRequest> requests);
  std::vector<Status> commit_batch(std::span<const CommitRequest> requests);
  /// The steps of the ticket's run (idem::StepStore), kept in the record's own hash: they share
  /// its slot and expiry, and a run under another payload sees none of them. One script each;
  /// lease_lost when the ticket no longer holds the record.
  Result<std::vector<StepRecord>> load_steps(const Ticket& ticket);
  Status save_step(const Ticket& ticket, const StepWrite& step);
  /// Keeps the run's request with its record (idem::CompletableStore; docs/steps.md, "The
  /// completer"): an entry in the scope's index of kept requests (a sorted set with a hash tag
  /// of its own) and the request in the record's hash under the ticket's fence (lease_lost, and
  /// nothing kept, when the ticket no longer holds it). One script on one server; on a Cluster
  /// the entry first, then the request's script: a crash between them leaves an entry without
  /// a request, which find_abandoned() drops. errc::key_invalid for a key that does not start
  /// with a scope (detail::EffectiveKey).
  Status keep_request(const Ticket& ticket, std::string_view request);
  /// At most `limit` records under `prefix` that are in progress past their lease, or released,
  /// with a request kept for their payload. Reads the prefix's scope index in pages of 256
  /// entries and checks each page's records in one script call (on a Cluster: one per hash
  /// slot), dropping the entries of records that finished, expired or moved on; its cost grows
  /// with the scope's runs in flight. errc::key_invalid when `prefix` does not start with a
  /// whole scope (idem::Completer passes its scope's).
  Result<std::vector<Abandoned>> find_abandoned(std::string_view prefix, std::size_t limit);

  /// The Redis key that holds the record of `effective_key`.
  std::string record_key(std::string_view effective_key) const;
  /// The Redis key of the index of kept requests that holds `effective_key`'s (a sorted set;
  /// any key or prefix of its scope names it); empty when the bytes do not start with a scope.
  std::string abandoned_index_key(std::string_view effective_key) const;
  /// Writes for which WAIT returned fewer replicas than Durability::replicas asked for.
  std::uint64_t replication_timeouts() const noexcept {
    return replication_timeouts_.load(std::memory_order_relaxed);
  }
  /// The store's figures: its client's pools, pipelines and cluster routing (shared with the
  /// other stores on the client: redis::Client::stats()) and this store's replication_timeouts().
  StoreStats stats() const {
    StoreStats out = client_->stats();
    out.store = kStoreName;
    if (auto* redis = out.parts.get<RedisStats>())
      redis->replication_timeouts = replication_timeouts();
    return out;
  }
  redis::Client& client() noexcept { return *client_; }

 private:
  std::shared_ptr<redis::Client> client_;
  RedisStoreOptions options_;
  std::atomic<std::uint64_t> replication_timeouts_{0};
};

static_assert(BatchStore<RedisStore>);
static_assert(WakingStore<RedisStore>);
static_assert(CompletableStore<RedisStore>);

}  // namespace idem
