// TLS contexts and sessions for both faces; see tls.hpp.

#include "tls.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace idem::redis {

namespace {

Failure config_invalid(std::string message) {
  return make_failure(errc::config_invalid, std::move(message));
}

// The reason of this thread's last OpenSSL error, the queue cleared; `fallback` when none.
std::string last_ssl_error(std::string_view fallback) {
  const unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  if (code == 0) return std::string(fallback);
  const char* reason = ERR_reason_error_string(code);
  if (reason != nullptr) return reason;
  std::array<char, 256> text{};
  ERR_error_string_n(code, text.data(), text.size());
  return text.data();
}

// Why `path` (a `what`) cannot be read, or empty. OpenSSL's own messages for a missing file
// are obscure ("system library"); errno says it plainly.
std::string unreadable(const std::string& path) {
  if (::access(path.c_str(), R_OK) == 0) return {};
  return std::strerror(errno);
}

bool is_address(const std::string& host) {
  std::array<unsigned char, 16> bytes{};
  return ::inet_pton(AF_INET, host.c_str(), bytes.data()) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), bytes.data()) == 1;
}

// The ex-data slot where a session notes that the server asked for a client certificate.
int asked_index() noexcept {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

// Called by OpenSSL when the server asks for a client certificate and none is loaded: notes it
// and sends none.
int no_certificate(SSL* ssl, X509** /*cert*/, EVP_PKEY** /*key*/) {
  static int asked = 1;
  (void)SSL_set_ex_data(ssl, asked_index(), &asked);
  return 0;
}

// Loads `options` into `ctx`: empty, or the config_invalid failure naming the file. Messages
// name files and OpenSSL's reasons, never a key's bytes.
std::optional<Failure> load(SSL_CTX* ctx, const TlsOptions& options) {
  const auto cannot = [](std::string_view what, const std::string& path, std::string why) {
    return config_invalid(fmt::format("redis TLS: cannot use the {} '{}': {}", what, path, why));
  };
  ERR_clear_error();
  (void)SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_verify(ctx, options.verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  for (const auto& [what, path] :
       {std::pair{"CA file", &options.ca_file}, std::pair{"CA folder", &options.ca_dir},
        std::pair{"certificate file", &options.cert_file},
        std::pair{"key file", &options.key_file}}) {
    if (path->empty()) continue;
    if (std::string why = unreadable(*path); !why.empty()) return cannot(what, *path, why);
  }
  if (options.cert_file.empty() != options.key_file.empty()) {
    return config_invalid(
        "redis TLS: a client certificate needs both cert_file and key_file; one is empty");
  }
  if (!options.ca_file.empty() || !options.ca_dir.empty()) {
    const char* file = options.ca_file.empty() ? nullptr : options.ca_file.c_str();
    const char* dir = options.ca_dir.empty() ? nullptr : options.ca_dir.c_str();
    if (SSL_CTX_load_verify_locations(ctx, file, dir) != 1) {
      return file != nullptr ? cannot("CA file", options.ca_file, last_ssl_error("unreadable"))
                             : cannot("CA folder", options.ca_dir, last_ssl_error("unreadable"));
    }
  } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
    return config_invalid("redis TLS: cannot load the system's default authorities: " +
                          last_ssl_error("unknown"));
  }
  if (options.cert_file.empty()) SSL_CTX_set_client_cert_cb(ctx, no_certificate);
  if (!options.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, options.cert_file.c_str()) != 1) {
      return cannot("certificate file", options.cert_file, last_ssl_error("unreadable"));
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, options.key_file.c_str(), SSL_FILETYPE_PEM) != 1 &&
        ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH) {
      return cannot("key file", options.key_file, last_ssl_error("unreadable"));
    }
    if (ERR_peek_last_error() != 0 || SSL_CTX_check_private_key(ctx) != 1) {
      ERR_clear_error();
      return config_invalid(
          fmt::format("redis TLS: the key file '{}' does not match the certificate file '{}'",
                      options.key_file, options.cert_file));
    }
  }
  return std::nullopt;
}

}  // namespace

std::shared_ptr<const TlsContext> TlsContext::make(const TlsOptions& options) {
  if (!options.enabled) return nullptr;
  std::shared_ptr<TlsContext> made(new TlsContext(options));
  made->ctx_ = SSL_CTX_new(TLS_client_method());
  if (made->ctx_ == nullptr) {
    made->unusable_ =
        config_invalid("redis TLS: cannot make a context: " + last_ssl_error("out of memory"));
  } else {
    made->unusable_ = load(made->ctx_, options);
  }
  return made;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

Result<SslPtr> TlsContext::session(const std::string& host) const {
  if (unusable_) return *unusable_;
  SslPtr ssl(SSL_new(ctx_));
  if (!ssl) return config_invalid("redis TLS: cannot start a session: " + last_ssl_error("?"));
  SSL_set_connect_state(ssl.get());
  const std::string& name = verified_name(host);
  const bool address = is_address(name);
  // SNI carries host names only (RFC 6066); an address is verified against the certificate's
  // IP entries instead.
  if (!address && SSL_set_tlsext_host_name(ssl.get(), name.c_str()) != 1) {
    return config_invalid(fmt::format("redis TLS: cannot use the server name '{}': {}", name,
                                      last_ssl_error("rejected")));
  }
  if (options_.verify) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl.get());
    const int set = address ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                            : X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
    if (set != 1) {
      return config_invalid(fmt::format("redis TLS: cannot verify the server name '{}': {}", name,
                                        last_ssl_error("rejected")));
    }
  }
  return ssl;
}

bool certificate_asked_for(const SSL* ssl) noexcept {
  return SSL_get_ex_data(ssl, asked_index()) != nullptr;
}

std::string ssl_failure_reason(int ssl_error, int sys_errno) {
  switch (ssl_error) {
    case SSL_ERROR_ZERO_RETURN:
      ERR_clear_error();
      return "the server closed the TLS session";
    case SSL_ERROR_SYSCALL:
      if (ERR_peek_last_error() != 0) return last_ssl_error("");
      return sys_errno != 0 ? std::strerror(sys_errno) : "connection closed by the server";
    default:
      return last_ssl_error(fmt::format("TLS error {}", ssl_error));
  }
}

std::string handshake_failure(const SSL* ssl, std::string_view reason, std::string_view name) {
  const long verdict = SSL_get_verify_result(ssl);
  if (SSL_get_verify_mode(ssl) != SSL_VERIFY_NONE && verdict != X509_V_OK) {
    return fmt::format("the server's certificate was refused: {} (name verified: {})",
                       X509_verify_cert_error_string(verdict), name);
  }
  // A plaintext server answers the TLS hello with a RESP error, which OpenSSL reads as a
  // record of an unknown version.
  const bool plaintext = reason.find("wrong version number") != std::string_view::npos ||
                         reason.find("packet length too long") != std::string_view::npos;
  return fmt::format("TLS handshake failed: {}{}", reason,
                     plaintext ? " (does the server speak TLS on this port?)" : "");
}

}  // namespace idem::redis
