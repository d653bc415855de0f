#include "config_fields.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace idem::proxy::config {

namespace {

// Upper bounds: far above any sensible value, low enough that no sum or conversion to the
// clock's nanoseconds overflows.
constexpr std::int64_t kDayMs = 86'400'000;
constexpr std::int64_t kTenYearsS = 315'360'000;
constexpr std::int64_t kMiB = std::int64_t{1} << 20;
constexpr std::int64_t kGiB = std::int64_t{1} << 30;
constexpr std::int64_t kDayS = 86'400;
constexpr std::int64_t kMostCached = 10'000'000;

bool is_printable(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char ch) {
    const auto byte = static_cast<unsigned char>(ch);
    return byte >= 0x20 && byte != 0x7f;
  });
}

bool is_host(std::string_view text) {
  constexpr std::size_t kLongestName = 253;
  return !text.empty() && text.size() <= kLongestName &&
         std::all_of(text.begin(), text.end(), [](char ch) {
           return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_' || ch == ':' ||
                  ch == '%';
         });
}

bool is_file_or_none(std::string_view text) { return is_printable(text); }

bool is_name(std::string_view text) { return !text.empty() && is_printable(text); }

// RFC 9110's token: what a header's name and a method are made of.
bool is_token_char(char ch) {
  constexpr std::string_view kSymbols = "!#$%&'*+-.^_`|~";
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         kSymbols.find(ch) != std::string_view::npos;
}

bool is_token(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), is_token_char);
}

// Methods are case-sensitive: "post" would never match a client's POST.
bool is_method(std::string_view text) {
  if (text == "*") return true;
  return is_token(text) &&
         std::none_of(text.begin(), text.end(), [](char ch) { return ch >= 'a' && ch <= 'z'; });
}

// "/payments" or "/orders/*": visible ASCII, no query or fragment, a '*' only as the last
// segment.
bool is_route_path(std::string_view text) {
  if (!text.starts_with('/')) return false;
  const bool visible = std::all_of(text.begin(), text.end(), [](char ch) {
    return ch > 0x20 && ch < 0x7f && ch != '?' && ch != '#';
  });
  if (!visible) return false;
  const auto star = text.find('*');
  return star == std::string_view::npos || (star == text.size() - 1 && text.ends_with("/*"));
}

constexpr TextRule kHost{&is_host, R"(a host name or IP address, e.g. "127.0.0.1" or "::1")"};
constexpr TextRule kFile{&is_file_or_none, R"(a file's path, or "" for none)"};
constexpr TextRule kScope{&is_name, "a name of printable characters, not empty"};
constexpr TextRule kHeaderName{&is_token, R"(a header's name, e.g. "Authorization")"};
constexpr TextRule kHeaderNames{&is_token, R"(header names, e.g. ["Content-Type"])"};
constexpr TextRule kMethod{&is_method,
                           R"(an HTTP method in capitals, e.g. "POST", or "*" for every one)"};
constexpr TextRule kRoutePath{&is_route_path,
                              "a path from \"/\" without query, e.g. \"/payments\", or a prefix "
                              "ending in \"/*\", e.g. \"/orders/*\""};

constexpr std::string_view kStoreForms =
    "sqlite:PATH, redis://..., rediss://..., redis+cluster://..., rediss+cluster://... or "
    "postgresql://...";

// The store's URI may hold a password: no mistake repeats it, only its scheme.
bool read_store_uri(ValueReader& reader, ProxyConfig& config) {
  const toml::value<std::string>* value = reader.node().as_string();
  if (value == nullptr) {
    reader.wrong_kind("a string", kStoreForms);
    return false;
  }
  const std::string& uri = value->get();
  const auto colon = uri.find(':');
  const std::string scheme = uri.substr(0, colon == std::string::npos ? 0 : colon);
  const bool scheme_chars = std::all_of(scheme.begin(), scheme.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '+' || ch == '-' ||
           ch == '.';
  });
  if (scheme.empty() || !scheme_chars) {
    reader.mistake("not a URI", kStoreForms);
    return false;
  }
  constexpr std::array<std::string_view, 7> kSchemes{
      "sqlite", "redis", "rediss", "redis+cluster", "rediss+cluster", "postgresql", "postgres"};
  if (std::find(kSchemes.begin(), kSchemes.end(), scheme) == kSchemes.end()) {
    reader.mistake("the scheme \"" + scheme + ":\" is not a store idem-proxy opens", kStoreForms);
    return false;
  }
  if (!is_printable(uri)) {
    reader.mistake("the URI holds control characters", kStoreForms);
    return false;
  }
  std::string_view rest = std::string_view(uri).substr(colon + 1);
  if (scheme == "sqlite") {
    if (rest.starts_with("//")) rest.remove_prefix(2);  // sqlite:///absolute/path
    if (rest.empty()) {
      reader.mistake("the URI names no file", "sqlite:PATH, e.g. sqlite:///var/lib/x.db");
      return false;
    }
  } else if (!rest.starts_with("//") || rest.size() == 2) {
    reader.mistake("the URI names no server", std::string(scheme) + "://HOST...");
    return false;
  }
  config.store.uri = uri;
  return true;
}

bool read_on_failure(ValueReader& reader, OnFailure& out) {
  return reader.choice(out, {{"release", OnFailure::release}, {"record", OnFailure::record}});
}

constexpr std::array<std::string_view, 3> kRouteFields{"method", "path", "key"};

// One [[route]] table, appended to `routes` unless it has a mistake or repeats a route.
bool read_route(const ValueReader& element, std::vector<Route>& routes) {
  const toml::table* table = element.node().as_table();
  constexpr std::string_view kRouteAllowed = "a table with method, path and key";
  if (table == nullptr) {
    element.wrong_kind("a table", kRouteAllowed);
    return false;
  }
  Route route;
  bool valid = true;
  bool has_path = false;
  for (const auto& [key, node] : entries_in_order(*table)) {
    ValueReader field = element.part(*node, element.field() + '.' + std::string(key->str()));
    if (key->str() == "method") {
      valid = field.text(route.method, kMethod) && valid;
    } else if (key->str() == "path") {
      has_path = true;
      valid = field.text(route.path, kRoutePath) && valid;
    } else if (key->str() == "key") {
      valid = field.choice(route.key,
                           {{"required", KeyUse::required}, {"honoured", KeyUse::honoured}}) &&
              valid;
    } else {
      element.add_line(unknown_name_line(where_of(key->source(), element.where()), field.field(),
                                         "field", "a route", kRouteFields));
      valid = false;
    }
  }
  if (!has_path) {
    element.part(*table, element.field() + ".path").mistake("missing", kRoutePath.allowed);
    valid = false;
  }
  if (!valid) return false;
  for (std::size_t i = 0; i < routes.size(); ++i) {
    if (routes[i].method == route.method && routes[i].path == route.path) {
      element.mistake("the same method and path as route[" + std::to_string(i) + "]",
                      "one route per method and path");
      return false;
    }
  }
  routes.push_back(std::move(route));
  return true;
}

// The [[route]] array (or route = [...]): every route, replacing those set before.
bool read_routes(ValueReader& reader, ProxyConfig& config) {
  const toml::array* array = reader.node().as_array();
  if (array == nullptr) {
    reader.wrong_kind("an array of tables", "[[route]] tables, each with method, path and key");
    return false;
  }
  std::vector<Route> routes;
  bool valid = true;
  for (std::size_t i = 0; i < array->size(); ++i) {
    const ValueReader element = reader.part((*array)[i], "route[" + std::to_string(i) + "]");
    valid = read_route(element, routes) && valid;
  }
  if (valid) config.routes = std::move(routes);
  return valid;
}

constexpr auto kTopLevel = std::to_array<FieldSpec>({
    {"threads", [](ValueReader& r, ProxyConfig& c) { return r.count(c.threads, 256); }},
    {"drain_timeout_ms",
     [](ValueReader& r, ProxyConfig& c) { return r.duration(c.drain_timeout, 0, kDayMs); }},
    {"route", &read_routes},
});

constexpr auto kListen = std::to_array<FieldSpec>({
    {"address", [](ValueReader& r, ProxyConfig& c) { return r.text(c.listen.address, kHost); }},
    {"port", [](ValueReader& r, ProxyConfig& c) { return r.integer(c.listen.port, 0, 65535); }},
    {"tls_certificate",
     [](ValueReader& r, ProxyConfig& c) { return r.text(c.listen.tls_certificate, kFile); }},
    {"tls_private_key",
     [](ValueReader& r, ProxyConfig& c) { return r.text(c.listen.tls_private_key, kFile); }},
    {"tls_client_ca",
     [](ValueReader& r, ProxyConfig& c) { return r.text(c.listen.tls_client_ca, kFile); }},
});

constexpr auto kUpstream = std::to_array<FieldSpec>({
    {"host", [](ValueReader& r, ProxyConfig& c) { return r.text(c.upstream.host, kHost); }},
    {"port", [](ValueReader& r, ProxyConfig& c) { return r.integer(c.upstream.port, 1, 65535); }},
    {"pool_size",
     [](ValueReader& r, ProxyConfig& c) { return r.count(c.upstream.pool_size, 65536); }},
    {"connect_timeout_ms",
     [](ValueReader& r, ProxyConfig& c) {
       return r.duration(c.upstream.connect_timeout, 1, kDayMs);
     }},
    {"response_timeout_ms",
     [](ValueReader& r, ProxyConfig& c) {
       return r.duration(c.upstream.response_timeout, 1, kDayMs);
     }},
    {"idle_timeout_ms",
     [](ValueReader& r, ProxyConfig& c) { return r.duration(c.upstream.idle_timeout, 1, kDayMs); }},
});

constexpr auto kStore = std::to_array<FieldSpec>({
    {"uri", &read_store_uri},
    {"scope", [](ValueReader& r, ProxyConfig& c) { return r.text(c.store.scope, kScope); }},
    {"lease_ms",
     [](ValueReader& r, ProxyConfig& c) { return r.duration(c.store.lease, 1, kDayMs); }},
    {"retention_s",
     [](ValueReader& r, ProxyConfig& c) { return r.duration(c.store.retention, 1, kTenYearsS); }},
    {"cache_entries",
     [](ValueReader& r, ProxyConfig& c) {
       int entries = 0;  // 0: no cache, which count() does not take
       if (!r.integer(entries, 0, kMostCached)) return false;
       c.store.cache_entries = static_cast<std::size_t>(entries);
       return true;
     }},
    {"cache_ttl_s",
     [](ValueReader& r, ProxyConfig& c) { return r.duration(c.store.cache_ttl, 1, kDayS); }},
});

constexpr auto kLimits = std::to_array<FieldSpec>({
    {"head_bytes",
     [](ValueReader& r, ProxyConfig& c) { return r.count(c.limits.head_bytes, kMiB); }},
    {"body_bytes",
     [](ValueReader& r, ProxyConfig& c) { return r.count(c.limits.body_bytes, kGiB); }},
    {"record_bytes",
     [](ValueReader& r, ProxyConfig& c) { return r.count(c.limits.record_bytes, kGiB); }},
    {"request_timeout_ms",
     [](ValueReader& r, ProxyConfig& c) {
       return r.duration(c.limits.request_timeout, 1, kDayMs);
     }},
    {"keep_alive_timeout_ms",
     [](ValueReader& r, ProxyConfig& c) {
       return r.duration(c.limits.keep_alive_timeout, 1, kDayMs);
     }},
    {"write_timeout_ms",
     [](ValueReader& r, ProxyConfig& c) { return r.duration(c.limits.write_timeout, 1, kDayMs); }},
    {"max_connections",
     [](ValueReader& r, ProxyConfig& c) { return r.count(c.limits.max_connections, 1'000'000); }},
    {"keep_alive_requests",
     [](ValueReader& r, ProxyConfig& c) {
       return r.count(c.limits.keep_alive_requests, 1'000'000'000);
     }},
});

constexpr auto kPrincipal = std::to_array<FieldSpec>({
    {"from",
     [](ValueReader& r, ProxyConfig& c) {
       return r.choice(c.principal.from,
                       {{"none", PrincipalSource::none},
                        {"header", PrincipalSource::header},
                        {"client-certificate", PrincipalSource::client_certificate}});
     }},
    {"header",
     [](ValueReader& r, ProxyConfig& c) { return r.text(c.principal.header, kHeaderName); }},
});

constexpr auto kFingerprint = std::to_array<FieldSpec>({
    {"headers",
     [](ValueReader& r, ProxyConfig& c) { return r.texts(c.fingerprint.headers, kHeaderNames); }},
});

constexpr auto kFailures = std::to_array<FieldSpec>({
    {"on_5xx",
     [](ValueReader& r, ProxyConfig& c) { return read_on_failure(r, c.failures.on_5xx); }},
    {"on_timeout",
     [](ValueReader& r, ProxyConfig& c) { return read_on_failure(r, c.failures.on_timeout); }},
    {"on_connect_failure",
     [](ValueReader& r, ProxyConfig& c) {
       return read_on_failure(r, c.failures.on_connect_failure);
     }},
    {"unrecorded_status",
     [](ValueReader& r, ProxyConfig& c) {
       return r.integer(c.failures.unrecorded_status, 400, 599);
     }},
});

constexpr auto kDuplicates = std::to_array<FieldSpec>({
    {"wait_ms",
     [](ValueReader& r, ProxyConfig& c) { return r.duration(c.duplicates.wait, 0, kDayMs); }},
});

constexpr auto kAdmin = std::to_array<FieldSpec>({
    {"address", [](ValueReader& r, ProxyConfig& c) { return r.text(c.admin.address, kHost); }},
    {"port", [](ValueReader& r, ProxyConfig& c) { return r.integer(c.admin.port, -1, 65535); }},
});

constexpr auto kSections = std::to_array<SectionSpec>({
    {"listen", kListen},
    {"upstream", kUpstream},
    {"store", kStore},
    {"limits", kLimits},
    {"principal", kPrincipal},
    {"fingerprint", kFingerprint},
    {"failures", kFailures},
    {"duplicates", kDuplicates},
    {"admin", kAdmin},
});

const FieldSpec* find_in(std::span<const FieldSpec> fields, std::string_view name) {
  const auto found = std::find_if(fields.begin(), fields.end(),
                                  [&](const FieldSpec& f) { return f.name == name; });
  return found == fields.end() ? nullptr : &*found;
}

// Levenshtein distance, for "did you mean".
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::span<const FieldSpec> top_level_fields() { return kTopLevel; }

std::span<const std::string_view> route_field_names() { return kRouteFields; }

std::span<const SectionSpec> sections() { return kSections; }

const SectionSpec* find_section(std::string_view name) {
  const auto found = std::find_if(kSections.begin(), kSections.end(),
                                  [&](const SectionSpec& s) { return s.name == name; });
  return found == kSections.end() ? nullptr : &*found;
}

const FieldSpec* find_field(std::string_view dotted) {
  const auto dot = dotted.find('.');
  if (dot == std::string_view::npos) return find_in(kTopLevel, dotted);
  const SectionSpec* section = find_section(dotted.substr(0, dot));
  return section == nullptr ? nullptr : find_in(section->fields, dotted.substr(dot + 1));
}

std::vector<std::string_view> field_names(std::span<const FieldSpec> fields) {
  std::vector<std::string_view> names;
  names.reserve(fields.size());
  for (const FieldSpec& f : fields) names.push_back(f.name);
  return names;
}

std::string unknown_name_line(std::string_view where, std::string_view name, std::string_view kind,
                              std::string_view place, std::span<const std::string_view> known) {
  // The last part of a dotted name is what was misspelt.
  const auto dot = name.rfind('.');
  const std::string_view last = dot == std::string_view::npos ? name : name.substr(dot + 1);
  std::string_view closest;
  std::size_t best = std::max<std::size_t>(2, last.size() / 3) + 1;
  for (std::string_view candidate : known) {
    // A duration without its unit ("wait" for "wait_ms") is as close as a typo.
    const bool unit_left_out = candidate.size() > last.size() + 1 && candidate.starts_with(last) &&
                               candidate[last.size()] == '_';
    const std::size_t d = unit_left_out ? 1 : edit_distance(last, candidate);
    if (d < best) {
      best = d;
      closest = candidate;
    }
  }
  std::string allowed;
  if (!closest.empty()) allowed = "did you mean \"" + std::string(closest) + "\"? ";
  allowed += std::string(place) + " has ";
  for (std::size_t i = 0; i < known.size(); ++i) {
    if (i > 0) allowed += ", ";
    allowed += known[i];
  }
  return mistake_line(where, name, "unknown " + std::string(kind), allowed);
}

}  // namespace idem::proxy::config
