#include "postgres/pg_certificate_probe.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <memory>
#include <utility>

namespace idem::postgres::detail {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const noexcept { return fd_; }
  int release() noexcept { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

bool wait_for(int fd, short events, Clock::time_point deadline) {
  pollfd p{fd, events, 0};
  for (;;) {
    const auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    const int n = ::poll(&p, 1, static_cast<int>(left));
    if (n > 0) return true;
    if (n == 0 || errno != EINTR) return false;
  }
}

// A non-blocking TCP connection to a numeric address, or -1.
int dial(const CertificateProbe& probe, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(probe.address.c_str(), probe.port.c_str(), &hints, &found) != 0) return -1;
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found, ::freeaddrinfo);
  const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  Socket s(fd);
  if (::connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
    if (errno != EINPROGRESS || !wait_for(fd, POLLOUT, deadline)) return -1;
    int error = 0;
    socklen_t size = sizeof error;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0 || error != 0) return -1;
  }
  return s.release();
}

// PostgreSQL's SSLRequest (length 8, code 80877103); the server answers 'S' to start TLS.
bool ask_for_tls(int fd, Clock::time_point deadline) {
  constexpr std::array<unsigned char, 8> kRequest{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f};
  if (!wait_for(fd, POLLOUT, deadline) ||
      ::send(fd, kRequest.data(), kRequest.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(kRequest.size())) {
    return false;
  }
  char answer = 0;
  return wait_for(fd, POLLIN, deadline) && ::recv(fd, &answer, 1, 0) == 1 && answer == 'S';
}

std::string in_words(long result, const std::string& authorities) {
  switch (result) {
    case X509_V_ERR_CERT_HAS_EXPIRED:
      return "the server's certificate has expired";
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return "the server's certificate is not valid yet";
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
      return fmt::format(
          "the server's certificate is not signed by an authority of sslrootcert '{}' (wrong CA)",
          authorities);
    default:
      return fmt::format("the server's certificate does not verify: {}",
                         X509_verify_cert_error_string(result));
  }
}

}  // namespace

std::string certificate_verdict(const CertificateProbe& probe, Clock::time_point deadline) {
  const int fd = dial(probe, deadline);
  if (fd < 0) return "";
  const Socket socket(fd);
  if (!ask_for_tls(fd, deadline)) return "";
  const std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> context(SSL_CTX_new(TLS_client_method()),
                                                                  SSL_CTX_free);
  if (!context) return "";
  // No verification in the handshake: the chain is verified all the same, and its verdict kept.
  SSL_CTX_set_verify(context.get(), SSL_VERIFY_NONE, nullptr);
  if (SSL_CTX_load_verify_locations(context.get(), probe.authorities.c_str(), nullptr) != 1) {
    ERR_clear_error();
    return "";
  }
  const std::unique_ptr<SSL, decltype(&SSL_free)> tls(SSL_new(context.get()), SSL_free);
  if (!tls || SSL_set_fd(tls.get(), fd) != 1) return "";
  in6_addr ignored{};
  const bool numeric = ::inet_pton(AF_INET, probe.server_name.c_str(), &ignored) == 1 ||
                       ::inet_pton(AF_INET6, probe.server_name.c_str(), &ignored) == 1;
  if (!probe.server_name.empty() && !numeric) {
    SSL_set_tlsext_host_name(tls.get(), probe.server_name.c_str());
  }
  for (;;) {
    const int done = SSL_connect(tls.get());
    if (done == 1) break;
    const int why = SSL_get_error(tls.get(), done);
    const bool more = (why == SSL_ERROR_WANT_READ && wait_for(fd, POLLIN, deadline)) ||
                      (why == SSL_ERROR_WANT_WRITE && wait_for(fd, POLLOUT, deadline));
    if (!more) {
      ERR_clear_error();
      return "";
    }
  }
  const long result = SSL_get_verify_result(tls.get());
  ERR_clear_error();
  return result == X509_V_OK ? "" : in_words(result, probe.authorities);
}

}  // namespace idem::postgres::detail
