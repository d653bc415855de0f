#include "listener_tls.hpp"

#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/system/error_code.hpp>
#include <stdexcept>

namespace idem::proxy {

namespace ssl = boost::asio::ssl;

namespace {

[[noreturn]] void cannot_use(const char* field, const std::string& path,
                             const boost::system::error_code& ec) {
  throw std::runtime_error(std::string("listen.") + field + ": cannot use '" + path +
                           "': " + ec.message());
}

std::string rfc2253(const X509_NAME* name) {
  BIO* out = BIO_new(BIO_s_mem());
  if (out == nullptr) return {};
  std::string text;
  if (X509_NAME_print_ex(out, name, 0, XN_FLAG_RFC2253) >= 0) {
    char* data = nullptr;
    const long n = BIO_get_mem_data(out, &data);
    if (n > 0) text.assign(data, static_cast<std::size_t>(n));
  }
  BIO_free(out);
  return text;
}

}  // namespace

std::unique_ptr<ssl::context> make_listener_tls(const ListenConfig& listen) {
  if (listen.tls_certificate.empty() && listen.tls_private_key.empty()) return nullptr;
  auto context = std::make_unique<ssl::context>(ssl::context::tls_server);
  boost::system::error_code ec;
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                           ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                           ssl::context::no_tlsv1_1 | ssl::context::single_dh_use,
                       ec);
  if (ec) throw std::runtime_error("TLS options: " + ec.message());
  context->use_certificate_chain_file(listen.tls_certificate, ec);
  if (ec) cannot_use("tls_certificate", listen.tls_certificate, ec);
  context->use_private_key_file(listen.tls_private_key, ssl::context::pem, ec);
  if (ec) cannot_use("tls_private_key", listen.tls_private_key, ec);
  if (SSL_CTX_check_private_key(context->native_handle()) != 1) {
    throw std::runtime_error("listen.tls_private_key: '" + listen.tls_private_key +
                             "' is not the key of listen.tls_certificate '" +
                             listen.tls_certificate + "'");
  }
  if (!listen.tls_client_ca.empty()) {
    context->load_verify_file(listen.tls_client_ca, ec);
    if (ec) cannot_use("tls_client_ca", listen.tls_client_ca, ec);
    // The CAs' names go in the certificate request, so a client with several certificates
    // picks one these CAs signed.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(listen.tls_client_ca.c_str())) {
      SSL_CTX_set_client_CA_list(context->native_handle(), names);
    }
    context->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert, ec);
    if (ec) throw std::runtime_error("TLS verify mode: " + ec.message());
  }
  return context;
}

std::string verified_client_name(void* native) {
  auto* ssl_handle = static_cast<SSL*>(native);
  if (ssl_handle == nullptr || SSL_get_verify_result(ssl_handle) != X509_V_OK) return {};
  X509* certificate = SSL_get1_peer_certificate(ssl_handle);
  if (certificate == nullptr) return {};
  std::string name = rfc2253(X509_get_subject_name(certificate));
  if (!name.empty()) name += '\n' + rfc2253(X509_get_issuer_name(certificate));
  X509_free(certificate);
  return name;
}

}  // namespace idem::proxy
