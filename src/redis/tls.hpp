#pragma once
// TLS under both faces' connections (docs/redis.md, "TLS"): one OpenSSL context per Client or
// AsyncRedisStore, holding its authorities, client certificate and verification settings, and
// one session per connection, with the name it sends (SNI) and verifies. Internal to idem_redis.

#include <openssl/ssl.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "idem/redis/client.hpp"
#include "idem/result.hpp"

namespace idem::redis {

struct SslFree {
  void operator()(SSL* ssl) const noexcept { SSL_free(ssl); }
};
/// A connection's TLS session.
using SslPtr = std::unique_ptr<SSL, SslFree>;

/// The OpenSSL context of one client: made once from its TlsOptions, shared by all of its
/// connections (every node's, in cluster mode). Immutable once made, so any thread may start
/// sessions on it.
class TlsContext {
 public:
  /// The context for `options`; null when TLS is off. A file that cannot be used does not fail
  /// here (a Client's constructor never fails): every session() then returns that
  /// errc::config_invalid, naming the file.
  static std::shared_ptr<const TlsContext> make(const TlsOptions& options);

  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;
  ~TlsContext();

  /// A client session for a connection to `host`: it sends server_name (else `host`, when a
  /// name rather than an address) as SNI and, with verification on, checks the certificate
  /// against that name or address. The context's config_invalid when its files were unusable.
  Result<SslPtr> session(const std::string& host) const;

  /// The config_invalid failure of files that could not be used; empty when usable.
  const std::optional<Failure>& unusable() const noexcept { return unusable_; }

  /// The name a connection to `host` verifies (server_name, else `host`), for messages.
  const std::string& verified_name(const std::string& host) const noexcept {
    return options_.server_name.empty() ? host : options_.server_name;
  }

 private:
  explicit TlsContext(TlsOptions options) : options_(std::move(options)) {}

  TlsOptions options_;
  SSL_CTX* ctx_ = nullptr;
  std::optional<Failure> unusable_;  // why the files could not be used
};

/// Whether the server asked `ssl`'s handshake for a client certificate and the client had none
/// to give (TlsOptions::cert_file empty): such a server ends the connection right after.
bool certificate_asked_for(const SSL* ssl) noexcept;

/// OpenSSL's reason for the failed call whose SSL_get_error was `ssl_error` (`sys_errno`: errno
/// after it, for SSL_ERROR_SYSCALL). Clears this thread's OpenSSL error queue.
std::string ssl_failure_reason(int ssl_error, int sys_errno);

/// Why the handshake on `ssl` failed: the verification's verdict when it refused the server's
/// certificate (X509_verify_cert_error_string, and `name`, the name verified), else `reason`.
std::string handshake_failure(const SSL* ssl, std::string_view reason, std::string_view name);

}  // namespace idem::redis
