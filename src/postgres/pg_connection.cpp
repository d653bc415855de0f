#include "postgres/pg_connection.hpp"

#include <fmt/format.h>
#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <optional>
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

// The wait of each step of a connect, against one deadline for the whole connect (none when the
// budget is zero).
class ConnectDeadline {
 public:
  explicit ConnectDeadline(milliseconds budget)
      : budget_(budget), deadline_(Clock::now() + budget) {}

  void operator()(int fd, bool read) const {
    if (fd < 0) return;  // no socket yet: libpq moves on by itself
    pollfd p{fd, static_cast<short>(read ? POLLIN : POLLOUT), 0};
    for (;;) {
      int timeout_ms = -1;
      if (budget_.count() > 0) {
        const auto left = std::chrono::ceil<milliseconds>(deadline_ - Clock::now());
        timeout_ms = static_cast<int>(std::max<long long>(0, left.count()));
      }
      const int ready = ::poll(&p, 1, timeout_ms);
      if (ready > 0) return;
      if (ready == 0) {
        throw pqxx::broken_connection(
            fmt::format("idem: no answer from PostgreSQL within the connect timeout of {} ms",
                        budget_.count()));
      }
      if (errno != EINTR) throw pqxx::broken_connection("idem: poll() failed while connecting");
    }
  }

 private:
  milliseconds budget_;
  Clock::time_point deadline_;
};

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

PgConnection::PgConnection(const std::string& conninfo, milliseconds connect_budget)
    : ConnectionBase(conninfo, ConnectDeadline(connect_budget)) {}

}  // namespace idem::pg
