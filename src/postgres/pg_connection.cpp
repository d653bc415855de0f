#include "postgres/pg_connection.hpp"

#include <fmt/format.h>
#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <new>
#include <optional>
#include <pqxx/except>
#include <string_view>
#include <utility>
#include <vector>

namespace idem::pg {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct Defaulted {
  const char* keyword;
  const char* value;
};
constexpr Defaulted kNetworkDefaults[] = {{"keepalives", "1"},
                                          {"keepalives_idle", "10"},
                                          {"keepalives_interval", "5"},
                                          {"keepalives_count", "3"},
                                          {"tcp_user_timeout", "10000"}};

// The keywords `conninfo` sets, with their values; nullopt when libpq cannot parse it (the
// connect then reports why).
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

[[noreturn]] void fail(PGconn* conn, const std::string& what) {
  PQfinish(conn);
  throw pqxx::broken_connection(what);
}

std::string libpq_error(PGconn* conn) {
  std::string message = PQerrorMessage(conn);
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  return message.empty() ? std::string("connection failed") : message;
}

}  // namespace

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
  if (seconds <= 0) return milliseconds{0};
  return milliseconds{std::max(seconds, 2L) * 1000};
}

BoundedConnect::handle BoundedConnect::do_startconnect(handle orig) {
  if (orig != nullptr) return orig;
  PGconn* conn = PQconnectStart(options().c_str());
  if (conn == nullptr) throw std::bad_alloc();
  const bool bounded = budget_.count() > 0;
  const auto deadline = Clock::now() + budget_;
  // Before the first PQconnectPoll, wait as for PGRES_POLLING_WRITING (libpq's protocol).
  PostgresPollingStatusType state = PGRES_POLLING_WRITING;
  for (;;) {
    if (PQstatus(conn) == CONNECTION_BAD || state == PGRES_POLLING_FAILED) {
      fail(conn, libpq_error(conn));
    }
    if (state == PGRES_POLLING_OK) return conn;
    pollfd p{PQsocket(conn), static_cast<short>(state == PGRES_POLLING_READING ? POLLIN : POLLOUT),
             0};
    int timeout_ms = -1;
    if (bounded) {
      const auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now());
      timeout_ms = static_cast<int>(std::max<long long>(0, left.count()));
    }
    const int ready = p.fd < 0 ? 1 : ::poll(&p, 1, timeout_ms);
    if (ready == 0) {
      fail(conn, fmt::format("idem: no answer from PostgreSQL within the connect timeout of {} ms",
                             budget_.count()));
    }
    if (ready < 0 && errno != EINTR) fail(conn, "idem: poll() failed while connecting");
    state = PQconnectPoll(conn);
  }
}

PgConnection::PgConnection(const std::string& conninfo, milliseconds connect_budget)
    : pqxx::connection_base(policy_), conninfo_(conninfo), policy_(conninfo_, connect_budget) {
  init();
  // A connection that broke stays broken: reopening it silently would lose its settings and
  // could send a statement again on a new connection. (Set once open: libpqxx's own first
  // activation counts as a reactivation.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  inhibit_reactivation(true);
#pragma GCC diagnostic pop
}

PgConnection::~PgConnection() noexcept { close(); }

}  // namespace idem::pg
