#pragma once
// Owns the stores and the service for one Config; mount() it on a server. SQLite by default,
// PostgreSQL with pg_uri; the gateway cache and tokens in memory, or in Redis with redis_uri (with
// a CachedStore in front, so that a hot replay is answered from this process's memory instead of
// a round trip); with `bare`, the bare twin on the same database and no idempotency store at all.

#include <httplib.h>

#include <memory>
#include <stdexcept>
#include <utility>

#include "bare_payments_service.hpp"
#include "idem/cached_store.hpp"
#include "idem/memory/request_id_cache.hpp"
#include "idem/memory/token_store.hpp"
#include "idem/postgres/store.hpp"
#include "idem/redis/request_id_cache.hpp"
#include "idem/redis/token_store.hpp"
#include "idem/sqlite/store.hpp"
#include "payments_config.hpp"
#include "payments_database.hpp"
#include "payments_service.hpp"
#include "transport/router.hpp"

namespace payments {

class App {
 public:
  explicit App(Config config) : config_(std::move(config)), db_(config_) {
    db_.create_schema();
    if (config_.bare) {
      service_ = std::make_unique<BarePaymentsService>(db_, config_.handler_delay);
      return;
    }
    open_records();
    if (config_.redis_uri.empty()) {
      idem::MemoryRequestIdCacheOptions cache_options;
      cache_options.guard.lease = config_.gateway_lease;
      memory_cache_ = std::make_unique<idem::MemoryRequestIdCache>(std::move(cache_options));
      memory_tokens_ = std::make_unique<idem::MemoryTokenStore>();
      service_ =
          std::make_unique<PaymentsService<idem::MemoryRequestIdCache, idem::MemoryTokenStore>>(
              *memory_cache_, gateway_settings(memory_cache_->options()), *memory_tokens_,
              *records_, db_, config_.handler_delay);
    } else {
      idem::Result<idem::redis::ConnectionOptions> o =
          idem::redis::ConnectionOptions::from_uri(config_.redis_uri);
      if (!o) throw std::runtime_error("--redis: " + o.failure().describe());
      o.value().pool_size = 16;
      redis_ = std::make_shared<idem::redis::Client>(o.value());
      watch_store("redis", *redis_);  // pools and pipelines of the cache and the tokens
      idem::RequestIdCacheOptions cache_options{.prefix = config_.prefix + "payments:req:"};
      cache_options.guard.lease = config_.gateway_lease;
      redis_cache_ = std::make_unique<idem::RequestIdCache>(redis_, std::move(cache_options));
      redis_tokens_ = std::make_unique<idem::RedisTokenStore>(
          redis_, idem::RedisTokenStoreOptions{.prefix = config_.prefix + "payments:token:"});
      // Completed answers stay in memory for a minute at most (never longer than in Redis).
      hot_replays_ = std::make_unique<HotReplays>(
          idem::CachedStoreOptions{.max_ttl = std::chrono::minutes{1}}, *redis_cache_);
      service_ = std::make_unique<PaymentsService<HotReplays, idem::RedisTokenStore>>(
          *hot_replays_, gateway_settings(redis_cache_->options()), *redis_tokens_, *records_, db_,
          config_.handler_delay);
    }
  }

  void mount(transport::Router& server) { service_->mount(server); }

 private:
  using HotReplays = idem::CachedStore<idem::RequestIdCache&>;

  static idem::LayerSettings gateway_settings(const idem::Options& o) {
    return idem::LayerSettings{
        .name = "request_id", .scope = o.scope, .lease = o.lease, .ttl = *o.ttl};
  }

  void open_records() {
    if (config_.pg_uri.empty()) {
      records_ = std::make_unique<idem::SqliteStore>(
          idem::SqliteStoreOptions{.path = config_.sqlite_path,
                                   .mode = idem::SqlMode::transactional,
                                   .table_prefix = config_.prefix + "idem_"});
    } else {
      records_ = std::make_unique<idem::PostgresStore>(idem::PostgresStoreOptions{
          .connection = {.uri = config_.pg_uri, .table_prefix = config_.prefix + "idem_"},
          .mode = idem::SqlMode::transactional,
          .pool = {.size = 16}});
    }
    if (idem::Status s = records_->ensure_schema(); !s) {
      throw std::runtime_error("record store: " + s.failure().describe());
    }
    watch_store("records", *records_);
  }

  Config config_;
  Database db_;
  std::unique_ptr<idem::SqlStore> records_;
  std::unique_ptr<idem::MemoryRequestIdCache> memory_cache_;
  std::unique_ptr<idem::MemoryTokenStore> memory_tokens_;
  std::shared_ptr<idem::redis::Client> redis_;
  std::unique_ptr<idem::RequestIdCache> redis_cache_;
  std::unique_ptr<HotReplays> hot_replays_;
  std::unique_ptr<idem::RedisTokenStore> redis_tokens_;
  std::unique_ptr<Service> service_;
};

}  // namespace payments
