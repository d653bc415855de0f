#include "postgres/pg_connection.hpp"

#include <fmt/format.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>

namespace idem::postgres::detail {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

class ConnectDeadline {  // one deadline for every wait of a connect
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

PgConnection::PgConnection(const std::string& conninfo, milliseconds connect_budget)
    : ConnectionBase(conninfo, ConnectDeadline(connect_budget)) {}

}  // namespace idem::postgres::detail
