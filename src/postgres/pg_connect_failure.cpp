#include "postgres/pg_connect_failure.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdlib>
#include <string_view>

#include "postgres/pg_certificate_probe.hpp"

namespace idem::postgres::detail {

namespace {

struct Meaning {
  std::string_view libpq_says;  // a part of libpq's (or the server's) message
  std::string_view meaning;
};

// In the order they are tried; libpq 15's words.
constexpr auto kMeanings = std::to_array<Meaning>({
    {"does not match host name",
     "TLS: wrong host name: the server's certificate is not for the host connected to"},
    {"server does not support SSL", "TLS: the server does not offer TLS, and sslmode requires it"},
    {"requires a valid client certificate",
     "TLS: the server requires a client certificate (sslcert and sslkey)"},
    {"alert unknown ca",
     "TLS: the server refused the client certificate (sslcert): not signed by an authority it "
     "trusts"},
    {"alert bad certificate", "TLS: the server refused the client certificate (sslcert)"},
    {"alert certificate expired", "TLS: the server refused the client certificate: expired"},
    {"root certificate file", "TLS settings: sslrootcert cannot be used"},
    {"could not read root certificate", "TLS settings: sslrootcert cannot be used"},
    {"could not load private key", "TLS settings: sslkey cannot be used"},
    {"private key file", "TLS settings: sslkey cannot be used"},
    {"certificate present, but not private key", "TLS settings: sslkey cannot be used"},
    {"could not read certificate file", "TLS settings: sslcert cannot be used"},
    {"could not open certificate file", "TLS settings: sslcert cannot be used"},
    // A login refused: the server's words name the role, never the password.
    {"password authentication failed",
     "authentication failed: the server refused the role's password"},
    {"no password supplied",
     "authentication failed: the server asks for a password and none was given (PGPASSWORD, "
     "PGPASSFILE or the connection string)"},
    {"no pg_hba.conf entry",
     "authentication failed: the server's pg_hba.conf admits no such connection (role, database, "
     "address or TLS)"},
});

// The value libpq used for `keyword`, or "".
std::string setting(PGconn* conn, std::string_view keyword) {
  PQconninfoOption* options = PQconninfo(conn);
  if (options == nullptr) return "";
  std::string value;
  for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->keyword == keyword && o->val != nullptr) value = o->val;
  }
  PQconninfoFree(options);
  return value;
}

// libpq's default authorities file when sslrootcert is not set.
std::string default_authorities() {
  const char* home = std::getenv("HOME");
  return home != nullptr ? fmt::format("{}/.postgresql/root.crt", home) : "";
}

std::string refused_chain(PGconn* conn, std::chrono::steady_clock::time_point deadline) {
  CertificateProbe probe{.address = PQhostaddr(conn) != nullptr ? PQhostaddr(conn) : "",
                         .port = PQport(conn) != nullptr ? PQport(conn) : "",
                         .server_name = PQhost(conn) != nullptr ? PQhost(conn) : "",
                         .authorities = setting(conn, "sslrootcert")};
  if (probe.authorities.empty()) probe.authorities = default_authorities();
  std::string verdict;
  if (!probe.address.empty() && !probe.port.empty() && !probe.authorities.empty()) {
    verdict = certificate_verdict(probe, deadline);
  }
  if (verdict.empty()) {
    verdict = fmt::format(
        "the server's certificate does not verify against sslrootcert '{}' (another authority, "
        "expired or not valid yet)",
        probe.authorities);
  }
  return "TLS: " + verdict;
}

}  // namespace

std::string explain_connect_failure(PGconn* conn, const std::string& why,
                                    std::chrono::steady_clock::time_point deadline) {
  if (conn == nullptr) return why;
  if (why.find("certificate verify failed") != std::string::npos) {
    return fmt::format("{} ({})", refused_chain(conn, deadline), why);
  }
  for (const Meaning& m : kMeanings) {
    if (why.find(m.libpq_says) != std::string::npos) return fmt::format("{} ({})", m.meaning, why);
  }
  return why;
}

}  // namespace idem::postgres::detail
