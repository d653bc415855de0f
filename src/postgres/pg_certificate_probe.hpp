#pragma once
// A second TLS handshake with a PostgreSQL server whose certificate libpq refused, to say why:
// libpq reports every refusal of the chain as "certificate verify failed", while the operator
// needs to know whether the authority is wrong or the certificate expired.

#include <chrono>
#include <string>

namespace idem::postgres::detail {

struct CertificateProbe {
  std::string address;      ///< the server's numeric IP address (no name lookup is made)
  std::string port;         ///< its port
  std::string server_name;  ///< the name sent as SNI (none when empty or an IP address)
  std::string authorities;  ///< the PEM file of trusted authorities (libpq's sslrootcert)
};

/// Why the server's certificate chain does not verify against `probe.authorities`, in a few
/// words ("the server's certificate has expired"...); "" when the probe could not tell (no
/// answer before `deadline`, no TLS, an unreadable file) or found the chain valid.
std::string certificate_verdict(const CertificateProbe& probe,
                                std::chrono::steady_clock::time_point deadline);

}  // namespace idem::postgres::detail
