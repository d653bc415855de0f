#pragma once
// idem-proxy's config file (TOML) and the command line's overrides of its fields, read into a
// ProxyConfig. Each source sets only the fields it names, so one field set keeps the others'
// values. Every mistake is one line, "WHERE: section.field: what is wrong (what is allowed)",
// where WHERE is FILE:LINE:COLUMN for the file and the option for an override (docs/proxy.md).

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/result.hpp"
#include "proxy_config.hpp"

namespace idem::proxy {

/// The listeners and the upstream, which the command line gives as HOST:PORT.
enum class Endpoint : std::uint8_t { listen, upstream, admin };

/// Builds a ProxyConfig from a config file and overrides, in the order they are given (a later
/// one wins), and collects every mistake instead of stopping at the first.
class ConfigBuilder {
 public:
  /// Starts from the defaults (a default-constructed ProxyConfig).
  ConfigBuilder() = default;

  /// Reads the TOML file at `path`. Mistakes cite `path` as given.
  void read_file(const std::string& path);
  /// Reads TOML text; mistakes cite `name` as its file.
  void read_text(std::string_view text, const std::string& name);

  /// `assignment` is SECTION.FIELD=VALUE (or FIELD=VALUE for a top-level field, route=[...] for
  /// the routes), VALUE in TOML syntax: 2000, "text", ["a", "b"]. Mistakes cite `where` (the
  /// option as typed); a store URI is never repeated in a mistake.
  void set(std::string_view assignment, std::string_view where);
  /// HOST:PORT, or [IPV6]:PORT, into the endpoint's address (host) and port.
  void set_endpoint(Endpoint endpoint, std::string_view host_port, std::string_view where);
  /// A string field ("store.uri") to `value` as it is, not as TOML.
  void set_text(std::string_view field, std::string_view value, std::string_view where);

  /// A mistake found by the caller (an option it refuses), said in its place among the others.
  void add_mistake(std::string line) { mistakes_.push_back(std::move(line)); }

  /// The checks across fields, once every source is read: the upstream's port is given, TLS
  /// has both its certificate and its key, a client-certificate principal has a client CA, the
  /// admin listener is not the client one, the upstream is not the proxy itself, the lease
  /// outlasts a forward. Only when no field
  /// had a mistake, so that one mistake is not said twice.
  void check();

  const ProxyConfig& config() const { return config_; }
  /// Every mistake so far, one line each, in the order of the sources (and of each file).
  const std::vector<std::string>& mistakes() const { return mistakes_; }
  bool ok() const { return mistakes_.empty(); }

 private:
  /// Where a field was last set (FILE:LINE:COL or an option), for the checks across fields.
  std::string origin_of(std::string_view field) const;

  ProxyConfig config_;
  std::vector<std::string> mistakes_;
  std::map<std::string, std::string, std::less<>> origins_;
  /// What a check about a field no source set cites: the first config file, or "idem-proxy".
  std::string first_file_;
};

/// Every field the config file takes, as docs/proxy.md names them: "threads", "listen.port", ...,
/// and a route's "route.method", "route.path", "route.key".
std::vector<std::string> config_field_names();

/// Reads the config file at `path` over the defaults and checks it: the configuration, or
/// errc::config_invalid with one line per mistake in its message.
Result<ProxyConfig> load_config_file(const std::string& path);

}  // namespace idem::proxy
