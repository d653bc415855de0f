#include "postgres/pg_link.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <new>
#include <optional>
#include <vector>

#include "postgres/pg_connect_failure.hpp"

namespace idem::postgres::detail {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How long the look at a refused certificate may take when the connect itself has no bound.
constexpr milliseconds kUnboundedProbe{5000};

// Waits until `fd` is ready for `events`; false when `deadline` passed first (none: budget 0).
bool ready(int fd, short events, Clock::time_point deadline, milliseconds budget) {
  pollfd p{fd, events, 0};
  for (;;) {
    int timeout_ms = -1;
    if (budget.count() > 0) {
      const auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now());
      timeout_ms = static_cast<int>(std::max<long long>(0, left.count()));
    }
    const int n = ::poll(&p, 1, timeout_ms);
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) throw LinkLost("idem: poll() failed on the PostgreSQL connection");
  }
}

PGconn* connect(const std::string& conninfo, milliseconds budget) {
  PGconn* conn = PQconnectStart(conninfo.c_str());
  if (conn == nullptr) throw std::bad_alloc();
  const auto deadline = Clock::now() + budget;
  try {
    PostgresPollingStatusType state = PGRES_POLLING_WRITING;  // libpq's rule for the start
    for (;;) {
      if (PQstatus(conn) == CONNECTION_BAD || state == PGRES_POLLING_FAILED) {
        const std::string why = first_line(PQerrorMessage(conn));
        if (why.empty()) throw LinkLost("connection failed");
        throw LinkLost(explain_connect_failure(
            conn, why, budget.count() > 0 ? deadline : Clock::now() + kUnboundedProbe));
      }
      if (state == PGRES_POLLING_OK) return conn;
      const int fd = PQsocket(conn);  // none yet: libpq moves on by itself
      if (fd >= 0 &&
          !ready(fd, state == PGRES_POLLING_READING ? POLLIN : POLLOUT, deadline, budget)) {
        throw LinkLost(fmt::format(
            "idem: no answer from PostgreSQL within the connect timeout of {} ms", budget.count()));
      }
      state = PQconnectPoll(conn);
    }
  } catch (...) {
    PQfinish(conn);
    throw;
  }
}

}  // namespace

NoReply::NoReply(milliseconds budget)
    : std::runtime_error(fmt::format(
          "idem: no reply from PostgreSQL within {} ms; connection dropped (a statement on its "
          "way may or may not have run)",
          budget.count())) {}

PgLink::PgLink(const std::string& conninfo, milliseconds connect_budget)
    : conn_(connect(conninfo, connect_budget)) {
  PQsetNoticeProcessor(
      conn_, [](void*, const char*) {}, nullptr);
  // Sends never block: a full socket buffer waits in run(), under the reply budget.
  if (PQsetnonblocking(conn_, 1) != 0) {
    const std::string why = first_line(PQerrorMessage(conn_));
    PQfinish(conn_);
    throw LinkLost(why);
  }
}

PgLink::~PgLink() { PQfinish(conn_); }

bool PgLink::looks_alive() const noexcept {
  if (!is_open()) return false;
  const int fd = PQsocket(conn_);
  if (fd < 0) return false;
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 0;
}

void PgLink::lost(std::string_view what) {
  lost_ = true;
  throw LinkLost(fmt::format("{}: {}", what, first_line(PQerrorMessage(conn_))));
}

Reply PgLink::run(const Query& query, milliseconds budget) {
  if (!is_open()) throw LinkLost("idem: the connection is closed");
  const auto deadline = Clock::now() + budget;
  const int fd = PQsocket(conn_);
  auto wait = [&](short events) {
    if (ready(fd, events, deadline, budget)) return;
    lost_ = true;
    ::shutdown(fd, SHUT_RDWR);  // the server sees the connection end too
    throw NoReply(budget);
  };
  if (send_query(conn_, query) != 1) lost("cannot send");
  for (int left = PQflush(conn_); left != 0; left = PQflush(conn_)) {
    if (left < 0) lost("cannot send");
    wait(POLLIN | POLLOUT);  // libpq may need to read to be able to write on
    if (PQconsumeInput(conn_) == 0) lost("connection lost");
  }
  Reply reply;
  std::optional<PgError> error;
  for (;;) {
    while (PQisBusy(conn_) != 0) {
      wait(POLLIN);
      if (PQconsumeInput(conn_) == 0) lost("connection lost");
    }
    PGresult* r = PQgetResult(conn_);
    if (r == nullptr) break;
    const ExecStatusType status = PQresultStatus(r);
    if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK || status == PGRES_EMPTY_QUERY) {
      const char* affected = PQcmdTuples(r);
      reply.affected = *affected != '\0' ? std::atoll(affected) : 0;
      reply.result.reset(r);
      continue;
    }
    if (status == PGRES_COPY_IN || status == PGRES_COPY_OUT || status == PGRES_COPY_BOTH) {
      PQclear(r);
      lost("a statement started COPY");  // none of the store's does
    }
    if (!error) {
      const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
      error.emplace(state != nullptr ? state : "", first_line(PQresultErrorMessage(r)));
    }
    PQclear(r);
  }
  if (PQstatus(conn_) == CONNECTION_BAD) lost(error ? error->what() : "connection lost");
  if (error) throw *error;
  return reply;
}

std::string PgLink::escape(std::string_view text) const {
  std::string out(text.size() * 2 + 1, '\0');
  int failed = 0;
  out.resize(PQescapeStringConn(conn_, out.data(), text.data(), text.size(), &failed));
  if (failed != 0) throw PgError("22021", first_line(PQerrorMessage(conn_)));
  return out;
}

}  // namespace idem::postgres::detail
