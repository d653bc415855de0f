#include "config_file.hpp"

#include <toml++/toml.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <utility>

#include "config_fields.hpp"
#include "config_reader.hpp"

namespace idem::proxy {

namespace {

using config::FieldSpec;
using config::mistake_line;
using config::ValueReader;
using Origins = std::map<std::string, std::string, std::less<>>;

// Reads one field's value; where it was set is kept when it is used.
void apply(const FieldSpec& spec, const std::string& dotted, const toml::node& value,
           std::string_view fallback_where, ProxyConfig& config, std::vector<std::string>& mistakes,
           Origins& origins) {
  ValueReader reader(value, dotted, fallback_where, mistakes);
  if (spec.apply(reader, config)) origins.insert_or_assign(dotted, reader.where());
}

// The mistake for a name at the top of a file that is neither a table nor a top-level field.
std::string unknown_top_level(std::string_view where, std::string_view name, bool is_table) {
  // A field written above its table: say which tables have it.
  std::string owners;
  for (const config::SectionSpec& section : config::sections()) {
    for (const FieldSpec& field : section.fields) {
      if (field.name == name)
        owners += std::string(owners.empty() ? "" : " or ") + "[" + std::string(section.name) + "]";
    }
  }
  if (!owners.empty() && !is_table) {
    return mistake_line(where, name, "unknown field at the top level",
                        "it belongs under " + owners);
  }
  std::vector<std::string_view> known = config::field_names(config::top_level_fields());
  for (const config::SectionSpec& section : config::sections()) known.push_back(section.name);
  return config::unknown_name_line(where, name, is_table ? "table" : "field", "the top level",
                                   known);
}

// The mistake for a --set of a field the schema does not have.
std::string unknown_override(std::string_view where, std::string_view dotted) {
  const auto dot = dotted.find('.');
  if (dot == std::string_view::npos) return unknown_top_level(where, dotted, false);
  const config::SectionSpec* section = config::find_section(dotted.substr(0, dot));
  if (section == nullptr) {
    std::vector<std::string_view> known;
    for (const config::SectionSpec& s : config::sections()) known.push_back(s.name);
    return config::unknown_name_line(where, dotted.substr(0, dot), "table", "the config", known);
  }
  return config::unknown_name_line(where, dotted, "field", "[" + std::string(section->name) + "]",
                                   config::field_names(section->fields));
}

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

bool same_interface(std::string_view a, std::string_view b) {
  const auto any = [](std::string_view address) { return address == "0.0.0.0" || address == "::"; };
  return a == b || any(a) || any(b);
}

}  // namespace

void ConfigBuilder::read_file(const std::string& path) {
  if (first_file_.empty()) first_file_ = path;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    mistakes_.push_back(mistake_line(path, "", "is a directory", "a TOML config file"));
    return;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const std::error_code why(errno, std::generic_category());
    mistakes_.push_back(mistake_line(path, "", "cannot be read: " + why.message(), ""));
    return;
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    mistakes_.push_back(mistake_line(path, "", "cannot be read", ""));
    return;
  }
  read_text(text.str(), path);
}

void ConfigBuilder::read_text(std::string_view text, const std::string& name) {
  if (first_file_.empty()) first_file_ = name;
  toml::table document;
  try {
    document = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    mistakes_.push_back(mistake_line(config::where_of(e.source(), name), "",
                                     "not valid TOML: " + std::string(e.description()), ""));
    return;
  }
  for (const auto& [key, node] : config::entries_in_order(document)) {
    const std::string name_here(key->str());
    const std::string where = config::where_of(key->source(), name);
    // A quoted key with a dot ("listen.port" = 1) is one name, not a table and its field.
    const FieldSpec* field =
        name_here.find('.') == std::string::npos ? config::find_field(name_here) : nullptr;
    if (field != nullptr) {
      apply(*field, name_here, *node, name, config_, mistakes_, origins_);
      continue;
    }
    const config::SectionSpec* section = config::find_section(name_here);
    if (section == nullptr) {
      mistakes_.push_back(unknown_top_level(where, name_here, node->is_table()));
      continue;
    }
    const toml::table* table = node->as_table();
    if (table == nullptr) {
      ValueReader(*node, name_here, name, mistakes_)
          .wrong_kind("a table", "[" + name_here + "] and its fields");
      continue;
    }
    for (const auto& [field_key, value] : config::entries_in_order(*table)) {
      const std::string dotted = name_here + '.' + std::string(field_key->str());
      if (const FieldSpec* spec = config::find_field(dotted)) {
        apply(*spec, dotted, *value, name, config_, mistakes_, origins_);
      } else {
        mistakes_.push_back(config::unknown_name_line(config::where_of(field_key->source(), name),
                                                      dotted, "field", "[" + name_here + "]",
                                                      config::field_names(section->fields)));
      }
    }
  }
}

void ConfigBuilder::set(std::string_view assignment, std::string_view where) {
  const auto equals = assignment.find('=');
  if (equals == std::string_view::npos) {
    mistakes_.push_back(
        mistake_line(where, "", "not SECTION.FIELD=VALUE", "e.g. duplicates.wait_ms=2000"));
    return;
  }
  const std::string dotted(trimmed(assignment.substr(0, equals)));
  const FieldSpec* field = config::find_field(dotted);
  if (field == nullptr) {
    mistakes_.push_back(unknown_override(where, dotted));
    return;
  }
  toml::table document;
  try {
    document = toml::parse("value = " + std::string(assignment.substr(equals + 1)));
  } catch (const toml::parse_error& e) {
    // A URI's text may be quoted back by the parser's description: not for the store's.
    const std::string what = dotted == "store.uri"
                                 ? std::string("the value is not a TOML string")
                                 : "the value is not TOML: " + std::string(e.description());
    mistakes_.push_back(mistake_line(where, dotted, what,
                                     R"(TOML syntax: 2000, "text" in double quotes, ["a", "b"])"));
    return;
  }
  const toml::node* value = document.get("value");
  if (document.size() != 1 || value == nullptr) {
    mistakes_.push_back(mistake_line(where, dotted, "more than one value", "one TOML value"));
    return;
  }
  apply(*field, dotted, *value, where, config_, mistakes_, origins_);
}

void ConfigBuilder::set_endpoint(Endpoint endpoint, std::string_view host_port,
                                 std::string_view where) {
  std::string section;
  std::string host_name = "address";
  switch (endpoint) {
    case Endpoint::listen:
      section = "listen";
      break;
    case Endpoint::upstream:
      section = "upstream";
      host_name = "host";
      break;
    case Endpoint::admin:
      section = "admin";
      break;
  }
  std::string_view host;
  std::string_view port;
  if (host_port.starts_with('[')) {  // [IPv6]:PORT
    const auto close = host_port.find(']');
    if (close != std::string_view::npos && host_port.substr(close + 1).starts_with(':')) {
      host = host_port.substr(1, close - 1);
      port = host_port.substr(close + 2);
    }
  } else if (const auto colon = host_port.rfind(':'); colon != std::string_view::npos) {
    host = host_port.substr(0, colon);
    port = host_port.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) host = {};  // IPv6 without brackets
  }
  constexpr std::size_t kLongestPort = 6;
  const bool digits = !port.empty() && port.size() <= kLongestPort &&
                      port.find_first_not_of("0123456789") == std::string_view::npos;
  if (host.empty() || !digits) {
    mistakes_.push_back(
        mistake_line(where, "", "not HOST:PORT", "e.g. 127.0.0.1:8080 or [::1]:8080"));
    return;
  }
  const std::string host_field = section + '.' + host_name;
  const std::string port_field = section + ".port";
  const toml::value<std::string> host_value{std::string(host)};
  apply(*config::find_field(host_field), host_field, host_value, where, config_, mistakes_,
        origins_);
  const toml::value<std::int64_t> port_value{std::stoll(std::string(port))};
  apply(*config::find_field(port_field), port_field, port_value, where, config_, mistakes_,
        origins_);
}

void ConfigBuilder::set_text(std::string_view field, std::string_view value,
                             std::string_view where) {
  const std::string dotted(field);
  const FieldSpec* spec = config::find_field(dotted);
  if (spec == nullptr) {
    mistakes_.push_back(unknown_override(where, dotted));
    return;
  }
  const toml::value<std::string> node{std::string(value)};
  apply(*spec, dotted, node, where, config_, mistakes_, origins_);
}

std::string ConfigBuilder::origin_of(std::string_view field) const {
  if (const auto found = origins_.find(field); found != origins_.end()) return found->second;
  return first_file_.empty() ? "idem-proxy" : first_file_;
}

void ConfigBuilder::check() {
  if (!mistakes_.empty()) return;
  const ProxyConfig& c = config_;
  if (c.upstream.port == 0) {
    mistakes_.push_back(mistake_line(origin_of("upstream.port"), "upstream.port",
                                     "missing: the upstream's port is required",
                                     "[upstream] port = 1 to 65535, or --upstream HOST:PORT"));
  }
  const ListenConfig& tls = c.listen;
  if (tls.tls_certificate.empty() != tls.tls_private_key.empty()) {
    const bool has_certificate = !tls.tls_certificate.empty();
    const std::string set = has_certificate ? "listen.tls_certificate" : "listen.tls_private_key";
    const std::string missing =
        has_certificate ? "listen.tls_private_key" : "listen.tls_certificate";
    mistakes_.push_back(mistake_line(origin_of(set), missing, "missing: " + set + " is set",
                                     "TLS needs both the certificate and its key, or neither"));
  }
  if (!tls.tls_client_ca.empty() && tls.tls_certificate.empty() && tls.tls_private_key.empty()) {
    mistakes_.push_back(mistake_line(
        origin_of("listen.tls_client_ca"), "listen.tls_client_ca",
        "set without TLS: client certificates come over TLS",
        "set listen.tls_certificate and listen.tls_private_key too, or leave it \"\""));
  }
  if (c.principal.from == PrincipalSource::client_certificate && tls.tls_client_ca.empty()) {
    mistakes_.push_back(
        mistake_line(origin_of("principal.from"), "principal.from",
                     "\"client-certificate\" without listen.tls_client_ca: no client presents one",
                     "set listen.tls_client_ca to the CA that signs the clients' certificates"));
  }
  if (c.admin.port > 0 && c.admin.port == tls.port &&
      same_interface(c.admin.address, tls.address)) {
    mistakes_.push_back(mistake_line(
        origin_of("admin.port"), "admin.port", std::to_string(c.admin.port) + " is listen.port too",
        "another port, 0 for a free one, or -1 for no admin listener"));
  }
  if (c.upstream.port == tls.port && same_interface(c.upstream.host, tls.address)) {
    mistakes_.push_back(mistake_line(
        origin_of("upstream.port"), "upstream.port",
        std::to_string(c.upstream.port) + " is listen.port too: the proxy would forward to itself",
        "the service's own port"));
  }
  // A forward holds its key for at most connect + response timeouts; a lease that ends sooner
  // lets another proxy take the key over and forward the same request again.
  const auto forward = c.upstream.connect_timeout + c.upstream.response_timeout;
  if (c.store.lease <= forward) {
    std::string field = "store.lease_ms";
    if (!origins_.contains(field) && origins_.contains("upstream.response_timeout_ms")) {
      field = "upstream.response_timeout_ms";
    }
    mistakes_.push_back(
        mistake_line(origin_of(field), "store.lease_ms",
                     std::to_string(c.store.lease.count()) +
                         " is not longer than a forward may take (upstream.connect_timeout_ms + "
                         "upstream.response_timeout_ms = " +
                         std::to_string(forward.count()) +
                         "): another proxy could take the key over and forward the request again",
                     "more than " + std::to_string(forward.count())));
  }
}

std::vector<std::string> config_field_names() {
  std::vector<std::string> names;
  for (const FieldSpec& field : config::top_level_fields()) {
    if (field.name != "route") names.emplace_back(field.name);
  }
  for (const config::SectionSpec& section : config::sections()) {
    for (const FieldSpec& field : section.fields) {
      names.push_back(std::string(section.name) + '.' + std::string(field.name));
    }
  }
  for (std::string_view field : config::route_field_names()) {
    names.push_back("route." + std::string(field));
  }
  return names;
}

Result<ProxyConfig> load_config_file(const std::string& path) {
  ConfigBuilder builder;
  builder.read_file(path);
  builder.check();
  if (builder.ok()) return builder.config();
  std::string message;
  for (const std::string& line : builder.mistakes()) {
    if (!message.empty()) message += '\n';
    message += line;
  }
  return make_failure(errc::config_invalid, std::move(message));
}

}  // namespace idem::proxy
