#pragma once
// idem-proxy's configuration, as the config file and the command line give it (docs/proxy.md
// lists every field with its default). A default-constructed ProxyConfig is the defaults; the
// loader (config_file.hpp) sets only what the file names, so one field set keeps the others.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace idem::proxy {

using std::chrono::milliseconds;

/// Whether a route's requests must carry an Idempotency-Key.
enum class KeyUse : std::uint8_t {
  required,  // a request without a key is refused 400 (problem+json), never forwarded
  honoured,  // a request without a key is forwarded unguarded; one with a key is guarded
};

/// Where a request's principal (the tenant its keys belong to) comes from.
enum class PrincipalSource : std::uint8_t {
  none,                // every client shares one key space
  header,              // a hash of the named header's value (e.g. Authorization); absent: none
  client_certificate,  // the verified TLS client certificate's subject and issuer
                       // (listen.tls_client_ca)
};

/// What a failed forward leaves behind for its key.
enum class OnFailure : std::uint8_t {
  release,  // nothing: the key is free and a retry is forwarded again (the default)
  record,   // the answer the client got (the upstream's 5xx, or the proxy's 502/504) is replayed
};

/// One guarded route: requests whose method and path match. A request no route matches is
/// forwarded unguarded.
struct Route {
  /// "POST", "PUT", ...; "*" matches every method.
  std::string method = "POST";
  /// "/payments" matches that path alone; "/orders/*" matches "/orders/" and every path under
  /// it. The query is not part of the match.
  std::string path;
  KeyUse key = KeyUse::required;
};

struct ListenConfig {
  std::string address = "127.0.0.1";
  /// 0: a free port (the first line on stdout names it).
  int port = 8080;
  /// TLS towards clients: both set, or neither (plain HTTP).
  std::string tls_certificate;
  std::string tls_private_key;
  /// Clients must present a certificate this CA signed (needed by
  /// PrincipalSource::client_certificate).
  std::string tls_client_ca;
};

/// The service behind the proxy: one HTTP/1.1 origin.
struct UpstreamConfig {
  std::string host = "127.0.0.1";
  int port = 0;  // required
  /// Keep-alive connections kept open to the upstream, at most.
  std::size_t pool_size = 64;
  milliseconds connect_timeout{2000};
  /// From the request's last byte sent to the answer's last byte read.
  milliseconds response_timeout{30000};
  /// A pooled connection unused this long is closed.
  milliseconds idle_timeout{30000};
};

/// The record store, by URI: sqlite:///path/file.db (the default, one host), redis://host:port,
/// redis+cluster://seed1,seed2 (the URI forms of the idem command, docs/operations.md),
/// postgresql://...
struct StoreConfig {
  std::string uri = "sqlite:///var/lib/idem-proxy/records.db";
  /// Keys are recorded under this scope: proxies sharing a store and a scope share keys.
  std::string scope = "idem-proxy";
  /// How long a forward may hold its key before another instance may take it over.
  milliseconds lease{60000};
  /// How long a recorded answer is replayed.
  std::chrono::seconds retention{86400};
  /// Recorded answers kept in this instance's memory, so that a repeat is answered without a
  /// store call (0: none). A key forgotten in the store by an operator may still be replayed
  /// from another instance's memory for up to cache_ttl.
  std::size_t cache_entries = 0;
  std::chrono::seconds cache_ttl{60};
};

/// Bounds on each client connection (as the payments examples bound theirs).
struct ClientLimits {
  std::size_t head_bytes = 16 * 1024;   // larger: 431
  std::size_t body_bytes = 8u << 20;    // a request body larger than this: 413, not forwarded
  std::size_t record_bytes = 1u << 20;  // an answer larger is streamed to the client, unrecorded
  milliseconds request_timeout{10000};  // a whole request, from its first byte (else 408)
  milliseconds keep_alive_timeout{5000};
  milliseconds write_timeout{10000};  // the client must take an answer within this
  std::size_t max_connections = 1024;
  std::size_t keep_alive_requests = 1000;
};

struct PrincipalConfig {
  PrincipalSource from = PrincipalSource::none;
  std::string header = "Authorization";
};

/// The payload a key is bound to: method, path, query, these headers' values and the body.
struct FingerprintConfig {
  std::vector<std::string> headers{"Content-Type"};
};

struct FailurePolicy {
  OnFailure on_5xx = OnFailure::release;
  OnFailure on_timeout = OnFailure::release;
  OnFailure on_connect_failure = OnFailure::release;
  /// What a repeat of a key whose answer was too large to record is told.
  int unrecorded_status = 413;
};

struct DuplicatePolicy {
  /// 0: a duplicate of a key in flight is answered 409 at once, with Retry-After; above 0: it
  /// waits that long for the first request's answer, then 409.
  milliseconds wait{0};
};

/// /metrics (Prometheus text) and /health, on a listener of their own so they never shadow an
/// upstream path. port -1: off; 0: a free port.
struct AdminConfig {
  std::string address = "127.0.0.1";
  int port = -1;
};

struct ProxyConfig {
  ListenConfig listen;
  UpstreamConfig upstream;
  StoreConfig store;
  ClientLimits limits;
  PrincipalConfig principal;
  FingerprintConfig fingerprint;
  FailurePolicy failures;
  DuplicatePolicy duplicates;
  AdminConfig admin;
  std::vector<Route> routes;
  /// I/O threads.
  std::size_t threads = 2;
  /// On SIGTERM: how long requests in hand may take to finish.
  milliseconds drain_timeout{30000};
};

}  // namespace idem::proxy
