#pragma once
// What idem-proxy's config tests share: a configuration read from TOML text, and every field of a
// ProxyConfig as text, so that two configurations compare field by field with a readable
// difference.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "config_file.hpp"

namespace idem::proxy::testing {

inline const char* name_of(KeyUse k) { return k == KeyUse::required ? "required" : "honoured"; }
inline const char* name_of(OnFailure f) { return f == OnFailure::release ? "release" : "record"; }
inline const char* name_of(PrincipalSource p) {
  switch (p) {
    case PrincipalSource::none:
      return "none";
    case PrincipalSource::header:
      return "header";
    case PrincipalSource::client_certificate:
      return "client-certificate";
  }
  return "?";
}

/// Every field of `c`, one line each.
inline std::string describe(const ProxyConfig& c) {
  std::ostringstream out;
  out << "threads=" << c.threads << "\ndrain_timeout=" << c.drain_timeout.count()
      << "\nlisten.address=" << c.listen.address << "\nlisten.port=" << c.listen.port
      << "\nlisten.tls_certificate=" << c.listen.tls_certificate
      << "\nlisten.tls_private_key=" << c.listen.tls_private_key
      << "\nlisten.tls_client_ca=" << c.listen.tls_client_ca
      << "\nupstream.host=" << c.upstream.host << "\nupstream.port=" << c.upstream.port
      << "\nupstream.pool_size=" << c.upstream.pool_size
      << "\nupstream.connect_timeout=" << c.upstream.connect_timeout.count()
      << "\nupstream.response_timeout=" << c.upstream.response_timeout.count()
      << "\nupstream.idle_timeout=" << c.upstream.idle_timeout.count()
      << "\nstore.uri=" << c.store.uri << "\nstore.scope=" << c.store.scope
      << "\nstore.lease=" << c.store.lease.count()
      << "\nstore.retention=" << c.store.retention.count()
      << "\nstore.cache_entries=" << c.store.cache_entries
      << "\nstore.cache_ttl=" << c.store.cache_ttl.count()
      << "\nlimits.head_bytes=" << c.limits.head_bytes
      << "\nlimits.body_bytes=" << c.limits.body_bytes
      << "\nlimits.record_bytes=" << c.limits.record_bytes
      << "\nlimits.request_timeout=" << c.limits.request_timeout.count()
      << "\nlimits.keep_alive_timeout=" << c.limits.keep_alive_timeout.count()
      << "\nlimits.write_timeout=" << c.limits.write_timeout.count()
      << "\nlimits.max_connections=" << c.limits.max_connections
      << "\nlimits.keep_alive_requests=" << c.limits.keep_alive_requests
      << "\nprincipal.from=" << name_of(c.principal.from)
      << "\nprincipal.header=" << c.principal.header << "\nfingerprint.headers=";
  for (const std::string& h : c.fingerprint.headers) out << '[' << h << ']';
  out << "\nfailures.on_5xx=" << name_of(c.failures.on_5xx)
      << "\nfailures.on_timeout=" << name_of(c.failures.on_timeout)
      << "\nfailures.on_connect_failure=" << name_of(c.failures.on_connect_failure)
      << "\nfailures.unrecorded_status=" << c.failures.unrecorded_status
      << "\nduplicates.wait=" << c.duplicates.wait.count() << "\nadmin.address=" << c.admin.address
      << "\nadmin.port=" << c.admin.port << '\n';
  for (const Route& r : c.routes) {
    out << "route=" << r.method << ' ' << r.path << ' ' << name_of(r.key) << '\n';
  }
  return out.str();
}

/// A configuration read from TOML text named "proxy.toml", checked, with its mistakes.
struct Loaded {
  ProxyConfig config;
  std::vector<std::string> mistakes;
};

inline Loaded load(std::string_view text) {
  ConfigBuilder builder;
  builder.read_text(text, "proxy.toml");
  builder.check();
  return {builder.config(), builder.mistakes()};
}

/// The defaults with an upstream port: the least a configuration needs.
inline ProxyConfig defaults_with_upstream(int port = 8081) {
  ProxyConfig c;
  c.upstream.port = port;
  return c;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Writes `text` to a file in the test's temporary folder and returns its path.
inline std::string write_temp_file(const std::string& name, std::string_view text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return path;
}

}  // namespace idem::proxy::testing
