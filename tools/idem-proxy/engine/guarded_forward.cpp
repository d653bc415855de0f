#include "guarded_forward.hpp"

#include <optional>
#include <string>
#include <utility>

#include "answer_bytes.hpp"
#include "hop_by_hop.hpp"
#include "idem/asio/async_guard.hpp"
#include "idem/http/idempotency_key.hpp"
#include "idem/http/problem.hpp"
#include "idem/http/stored_response.hpp"
#include "request_identity.hpp"
#include "route_match.hpp"
#include "upstream_exchange.hpp"

namespace idem::proxy {

namespace net = boost::asio;
using idem::http::StoredResponse;
using Attempt = AsyncAttempt<StoredResponse, AnyStore>;

namespace {

// The encoded answer's fields and framing beside its body: the upstream's head may be up to
// 64 KiB (upstream_exchange.cpp).
constexpr std::size_t kRecordOverhead = 64 * 1024 + 64;

Options guard_options(const ProxyConfig& config, std::shared_ptr<Observer> observer) {
  Options o;
  o.scope = config.store.scope;
  o.lease = config.store.lease;
  o.ttl = std::chrono::duration_cast<std::chrono::milliseconds>(config.store.retention);
  if (config.duplicates.wait.count() > 0) {
    o.in_progress = Wait{.timeout = config.duplicates.wait};
  } else {
    o.in_progress = FailFast{};
  }
  o.max_result_size = config.limits.record_bytes + kRecordOverhead;
  o.observer = std::move(observer);
  return o;
}

StoredResponse problem_answer(int status, std::string_view name, std::string title,
                              std::string detail) {
  return StoredResponse{status,
                        {{"Content-Type", std::string(idem::http::kProblemContentType)}},
                        idem::http::problem_json({.type = "urn:idem:problem:" + std::string(name),
                                                  .title = std::move(title),
                                                  .status = status,
                                                  .detail = std::move(detail)})};
}

// The proxy's own answer when the upstream could not answer: 504 after a timeout, else 502.
StoredResponse upstream_failure_answer(UpstreamFailure failure) {
  switch (failure) {
    case UpstreamFailure::timeout:
      return problem_answer(504, "upstream_timeout", "Gateway Timeout",
                            "the upstream did not answer within upstream.response_timeout");
    case UpstreamFailure::connect:
      return problem_answer(502, "upstream_unreachable", "Bad Gateway",
                            "no connection to the upstream could be opened");
    case UpstreamFailure::broken:
    case UpstreamFailure::none:
      break;
  }
  return problem_answer(502, "upstream_failed", "Bad Gateway",
                        "the connection to the upstream failed before its answer was whole");
}

}  // namespace

struct GuardedForward::Impl {
  Impl(const ProxyConfig& c, AnyStore& store, UpstreamPool& p, ProxyMetrics& m)
      : config(c), guard(store, guard_options(c, m.observer())), pool(p), metrics(m) {}

  const ProxyConfig& config;
  AsyncGuard<AnyStore> guard;
  UpstreamPool& pool;
  ProxyMetrics& metrics;

  OnFailure policy_for(UpstreamFailure failure) const {
    switch (failure) {
      case UpstreamFailure::timeout:
        return config.failures.on_timeout;
      case UpstreamFailure::connect:
      case UpstreamFailure::broken:
      case UpstreamFailure::none:
        break;
    }
    return config.failures.on_connect_failure;
  }

  net::awaitable<void> answer(ClientSide& client, const StoredResponse& r) {
    co_await client.write(whole_answer(r, client.version(), client.keep_alive()));
  }

  net::awaitable<void> refuse(ClientSide& client, const StoredResponse& r) {
    metrics.refused(r.status);
    co_await answer(client, r);
  }

  // The answer for an outcome that carries no value: problem+json as problem_for builds it.
  net::awaitable<void> refuse(ClientSide& client, const Outcome<StoredResponse>& out) {
    std::optional<idem::http::ProblemResponse> p = idem::http::problem_for(out);
    StoredResponse r{p->status,
                     {{"Content-Type", std::string(idem::http::kProblemContentType)}},
                     std::move(p->body)};
    if (p->retry_after) r.headers.emplace_back("Retry-After", std::to_string(*p->retry_after));
    co_await refuse(client, r);
  }

  // What becomes of a held key once the upstream answered `r`: released when it is a failure
  // the policy releases, else recorded.
  static net::awaitable<void> settle(Attempt* attempt, const StoredResponse& r, bool failure,
                                     OnFailure policy, std::string why) {
    if (attempt == nullptr) co_return;
    if (failure && policy == OnFailure::release) {
      (void)co_await attempt->async_fail(std::move(why));
    } else {
      (void)co_await attempt->async_commit(r);
    }
  }

  net::awaitable<void> handle(const ProxyRequest& request, ClientSide& client);
  net::awaitable<void> forward(const ProxyRequest& request, ClientSide& client, Attempt* attempt);
  net::awaitable<void> stream(UpstreamExchange& x, ClientSide& client, int status,
                              const Headers& headers);
};

net::awaitable<void> GuardedForward::Impl::handle(const ProxyRequest& request, ClientSide& client) {
  const Route* route = match_route(config.routes, request.method, request.path);
  const auto fields = request.values("Idempotency-Key");
  if (route == nullptr || (fields.empty() && route->key == KeyUse::honoured)) {
    co_await forward(request, client, nullptr);
    co_return;
  }
  idem::http::ParsedKey parsed = idem::http::parse_idempotency_key_fields(fields);
  if (!parsed) {
    co_await refuse(client, Outcome<StoredResponse>::failed(
                                make_failure(errc::key_invalid, std::string(parsed.reason()))));
    co_return;
  }
  const std::string principal = principal_of(request, config.principal);
  const std::string payload = payload_of(request, config.fingerprint.headers);
  Attempt attempt = co_await guard.async_begin<StoredResponse>(
      Key{std::move(parsed).take_key(), principal}, payload);
  if (!attempt.acquired()) {
    Outcome<StoredResponse>& out = attempt.outcome();
    if (out) {  // a replay: a held key is never answered with a value
      metrics.replayed();
      StoredResponse replay = std::move(out).value();
      replay.headers.emplace_back("Idempotent-Replayed", "true");
      co_await answer(client, replay);
    } else {
      co_await refuse(client, out);
    }
    co_return;
  }
  co_await forward(request, client, &attempt);
}

net::awaitable<void> GuardedForward::Impl::forward(const ProxyRequest& request, ClientSide& client,
                                                   Attempt* attempt) {
  metrics.forwarded(attempt != nullptr);
  UpstreamExchange x(pool, config.upstream);
  if (!co_await x.send(upstream_request(request, {}), request.method == "HEAD")) {
    const StoredResponse r = upstream_failure_answer(x.failure());
    co_await settle(attempt, r, true, policy_for(x.failure()), r.body);
    co_await refuse(client, r);
    co_return;
  }
  const int status = x.status();
  const bool failed = status >= 500;
  const std::string why = "the upstream answered " + std::to_string(status);
  switch (co_await x.read_body(config.limits.record_bytes)) {
    case BodyRead::failed: {
      const StoredResponse r = upstream_failure_answer(x.failure());
      co_await settle(attempt, r, true, policy_for(x.failure()), r.body);
      co_await refuse(client, r);
      co_return;
    }
    case BodyRead::whole: {
      const StoredResponse r{status, end_to_end(x.headers()), std::move(x.body())};
      x.give_back();
      co_await settle(attempt, r, failed, config.failures.on_5xx, why);
      co_await answer(client, r);
      co_return;
    }
    case BodyRead::over:
      break;
  }
  // Too large to record: the key keeps a marker that repeats are answered with, and the answer
  // goes to the client as it comes.
  const int marked = config.failures.unrecorded_status;
  const StoredResponse marker = problem_answer(
      marked, "answer_not_recorded", "The answer was not recorded",
      "the upstream's answer to this key was larger than limits.record_bytes (" +
          std::to_string(config.limits.record_bytes) + " bytes): it was sent once, not kept");
  co_await settle(attempt, marker, failed, config.failures.on_5xx, why);
  co_await stream(x, client, status, end_to_end(x.headers()));
}

net::awaitable<void> GuardedForward::Impl::stream(UpstreamExchange& x, ClientSide& client,
                                                  int status, const Headers& headers) {
  const std::optional<std::uint64_t> length = x.content_length();
  Framing framing = Framing::length;
  if (!length) framing = client.version() >= 11 ? Framing::chunked : Framing::close;
  if (framing == Framing::close) client.close_after();
  const auto framed = [framing](std::string_view piece) {
    return framing == Framing::chunked ? chunk(piece) : std::string(piece);
  };
  if (!co_await client.write(answer_head(status, headers, client.version(), client.keep_alive(),
                                         framing, length.value_or(0)) +
                             framed(x.body()))) {
    co_return;
  }
  for (;;) {
    if (!co_await x.next_piece()) {
      // The upstream broke off: the client sees the body cut short, and the connection's end.
      client.close_after();
      co_return;
    }
    if (x.body().empty()) break;
    if (!co_await client.write(framed(x.body()))) co_return;
  }
  if (framing == Framing::chunked) co_await client.write(kLastChunk);
}

GuardedForward::GuardedForward(const ProxyConfig& config, AnyStore& store, UpstreamPool& pool,
                               ProxyMetrics& metrics)
    : impl_(std::make_unique<Impl>(config, store, pool, metrics)) {}

GuardedForward::~GuardedForward() = default;

net::awaitable<void> GuardedForward::handle(const ProxyRequest& request, ClientSide& client) {
  return impl_->handle(request, client);
}

}  // namespace idem::proxy
