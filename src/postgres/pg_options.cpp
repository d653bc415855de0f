#include "postgres/pg_options.hpp"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "common/redacted_uri.hpp"
#include "sql/statements.hpp"

namespace idem::postgres::detail {

namespace {

using std::chrono::milliseconds;

struct Defaulted {
  const char* keyword;
  const char* value;
};
constexpr auto kNetworkDefaults = std::to_array<Defaulted>({{"keepalives", "1"},
                                                            {"keepalives_idle", "10"},
                                                            {"keepalives_interval", "5"},
                                                            {"keepalives_count", "3"},
                                                            {"tcp_user_timeout", "10000"}});

// The keywords `conninfo` sets; nullopt when libpq cannot parse it (the connect says why).
using Parsed = std::vector<std::pair<std::string, std::string>>;
std::optional<Parsed> parse(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (error != nullptr) PQfreemem(error);
  if (options == nullptr) return std::nullopt;
  Parsed set;
  for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val != nullptr) set.emplace_back(o->keyword, o->val);
  }
  PQconninfoFree(options);
  return set;
}

const std::string* find(const Parsed& parsed, std::string_view keyword) {
  for (const auto& [k, v] : parsed) {
    if (k == keyword) return &v;
  }
  return nullptr;
}

}  // namespace

std::optional<std::string> conninfo_error(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (options != nullptr) PQconninfoFree(options);
  if (error == nullptr) {
    if (options != nullptr) return std::nullopt;
    return "libpq could not read it (out of memory)";
  }
  std::string why = error;
  PQfreemem(error);
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  // libpq quotes a URI it cannot read whole: its password is shown as *** instead.
  const std::string redacted =
      idem::detail::redacted_uri(conninfo, idem::detail::LoneUserInfo::user);
  if (redacted == conninfo) return why;
  for (auto pos = why.find(conninfo); pos != std::string::npos;
       pos = why.find(conninfo, pos + redacted.size())) {
    why.replace(pos, conninfo.size(), redacted);
  }
  return why;
}

void check(const ConnectionOptions& connection, std::string_view who, std::string_view field,
           bool tables) {
  auto refuse = [&](std::string_view why) {
    throw std::invalid_argument(fmt::format("idem::{}: {}{}", who, field, why));
  };
  if (connection.uri.empty()) refuse("uri is empty");
  // Else every call would report an outage for what is a configuration error.
  if (const auto why = conninfo_error(connection.uri)) refuse("uri cannot be used: " + *why);
  if (tables && !sql::valid_prefix(connection.table_prefix)) {
    refuse("table_prefix '" + connection.table_prefix +
           "' must be letters, digits and '_' (not starting with a digit)");
  }
  if (connection.connect_timeout.count() <= 0) {
    refuse("connect_timeout must be positive: every connect has a bound");
  }
}

PostgresStoreOptions checked(PostgresStoreOptions options) {
  check(options.connection, "PostgresStore", "connection.");
  const PostgresReplicaOptions& r = options.replica;
  if (options.pool.size == 0) throw std::invalid_argument("idem::PostgresStore: pool.size is 0");
  if (!r.uri.empty()) {
    check(replica_pool_options(options).connection, "PostgresStore", "replica.");
    if (r.pool_size == 0) {
      throw std::invalid_argument("idem::PostgresStore: replica.pool_size is 0");
    }
  }
  return options;
}

PostgresStoreOptions replica_pool_options(const PostgresStoreOptions& options) {
  const PostgresReplicaOptions& r = options.replica;
  return PostgresStoreOptions{.connection = {.uri = r.uri,
                                             .table_prefix = options.connection.table_prefix,
                                             .connect_timeout = r.connect_timeout,
                                             .statement_timeout = r.statement_timeout},
                              .mode = options.mode,
                              .pool = {.size = r.pool_size, .acquire_timeout = r.acquire_timeout}};
}

std::string with_network_defaults(const std::string& conninfo) {
  const std::optional<Parsed> parsed = parse(conninfo);
  if (!parsed) return conninfo;
  const bool is_uri =
      conninfo.rfind("postgresql://", 0) == 0 || conninfo.rfind("postgres://", 0) == 0;
  std::string out = conninfo;
  bool query = is_uri && conninfo.find('?') != std::string::npos;
  for (const Defaulted& d : kNetworkDefaults) {
    if (find(*parsed, d.keyword) != nullptr) continue;
    if (is_uri) {
      out += query ? '&' : '?';
      query = true;
      out += fmt::format("{}={}", d.keyword, d.value);
    } else {
      out += fmt::format(" {}={}", d.keyword, d.value);
    }
  }
  return out;
}

milliseconds connect_budget(const std::string& conninfo, milliseconds fallback) {
  const std::optional<Parsed> parsed = parse(conninfo);
  const std::string* set = parsed ? find(*parsed, "connect_timeout") : nullptr;
  if (set == nullptr) return std::max(fallback, milliseconds{0});
  const long seconds = std::strtol(set->c_str(), nullptr, 10);
  if (seconds <= 0) return std::max(fallback, milliseconds{0});
  return milliseconds{std::max(seconds, 2L) * 1000};
}

}  // namespace idem::postgres::detail
