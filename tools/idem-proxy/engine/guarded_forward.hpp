#pragma once
// The proxy's answer to each request (docs/proxy.md, "What it does"): a request no route guards
// is forwarded as it is; a guarded one is claimed under its Idempotency-Key and principal with
// its payload's fingerprint, forwarded once, its answer recorded and replayed to every repeat
// (Idempotent-Replayed: true); duplicates in flight, other payloads and bad keys are answered
// problem+json as idem::http::problem_for builds them. Upstream failures follow [failures].

#include <boost/asio/awaitable.hpp>
#include <memory>

#include "any_store.hpp"
#include "client_side.hpp"
#include "proxy_config.hpp"
#include "proxy_metrics.hpp"
#include "upstream_pool.hpp"

namespace idem::proxy {

class GuardedForward final : public RequestHandler {
 public:
  /// Everything given must outlive this handler.
  GuardedForward(const ProxyConfig& config, AnyStore& store, UpstreamPool& pool,
                 ProxyMetrics& metrics);
  ~GuardedForward() override;
  GuardedForward(const GuardedForward&) = delete;
  GuardedForward& operator=(const GuardedForward&) = delete;

  boost::asio::awaitable<void> handle(const ProxyRequest& request, ClientSide& client) override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace idem::proxy
