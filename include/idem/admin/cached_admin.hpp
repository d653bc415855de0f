#pragma once
// The admin of a CachedStore or AsyncCachedStore (header-only): the backend's admin, which also
// drops each key it releases or forgets from this process's cache (docs/operations.md).

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "idem/admin.hpp"
#include "idem/key.hpp"

namespace idem::admin {

/// A store with a local replay cache whose records can be dropped by effective key.
template <class Cache>
concept InvalidatableCache = requires(Cache& cache, std::string_view effective_key) {
  cache.invalidate(effective_key);
};

template <InvalidatableCache Cache>
class CachedAdmin final : public Admin {
 public:
  /// `cache` must outlive the admin; `backend` is the admin of the store the cache wraps.
  CachedAdmin(Cache& cache, std::unique_ptr<Admin> backend)
      : cache_(cache), backend_(std::move(backend)) {
    if (!backend_) throw std::invalid_argument("idem: cached_admin needs the backend's admin");
  }

  std::string_view store_name() const noexcept override { return backend_->store_name(); }
  Result<std::optional<RecordInfo>> inspect(std::string_view scope, const Key& key) override {
    return backend_->inspect(scope, key);
  }
  Result<Page> list(std::string_view scope, const ListRequest& request) override {
    return backend_->list(scope, request);
  }
  /// The backend's release, then the key leaves the cache (whatever the release found).
  Result<Change> release(std::string_view scope, const Key& key, Fence only_fence) override {
    Result<Change> change = backend_->release(scope, key, only_fence);
    invalidate(scope, key);
    return change;
  }
  /// The backend's forget, then the key leaves the cache (whatever the forget found).
  Result<Change> forget(std::string_view scope, const Key& key) override {
    Result<Change> change = backend_->forget(scope, key);
    invalidate(scope, key);
    return change;
  }
  /// The backend's purge; the cache never keeps a record past its expiry.
  Result<std::size_t> purge_expired(std::size_t max_records) override {
    return backend_->purge_expired(max_records);
  }
  std::string schema_text() const override { return backend_->schema_text(); }
  Result<SchemaReport> check_schema() override { return backend_->check_schema(); }
  Result<SchemaReport> migrate_schema() override { return backend_->migrate_schema(); }
  Result<Stats> stats(std::string_view scope, bool all_scopes) override {
    return backend_->stats(scope, all_scopes);
  }

 private:
  void invalidate(std::string_view scope, const Key& key) {
    if (!key.id.empty()) cache_.invalidate(detail::effective_key(scope, key));
  }

  Cache& cache_;
  std::unique_ptr<Admin> backend_;
};

/// The admin to use for a store behind `cache` (a CachedStore or an AsyncCachedStore):
/// `backend` (the store's own admin) with the cache kept in step. Throws std::invalid_argument
/// when `backend` is null.
template <InvalidatableCache Cache>
std::unique_ptr<Admin> cached_admin(Cache& cache, std::unique_ptr<Admin> backend) {
  return std::make_unique<CachedAdmin<Cache>>(cache, std::move(backend));
}

}  // namespace idem::admin
