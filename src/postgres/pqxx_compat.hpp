#pragma once
// The places where libpqxx 6.4 and 7 differ, so that the rest of the PostgreSQL adapter is written
// once. Where 6 has no equivalent, the 7 side uses the API libpqxx 7.10 shares with 8.x
// (pqxx::prepped, pqxx::params, pqxx::bytes, pqxx::connecting); older 7.x releases (7.7 to 7.9)
// get the calls 7.10 deprecated. The 8.x side of each #if follows 8's headers but is not built
// here (8 needs <format>); docs/sql.md lists what remains untested on it.

#include <cstddef>
#include <functional>
#include <pqxx/pqxx>
#include <pqxx/version>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#if PQXX_VERSION_MAJOR < 6 || (PQXX_VERSION_MAJOR == 6 && PQXX_VERSION_MINOR < 4) || \
    (PQXX_VERSION_MAJOR == 7 && PQXX_VERSION_MINOR < 7) || PQXX_VERSION_MAJOR > 8
#error \
    "idem's PostgreSQL adapter needs libpqxx 6.4, or 7.7 or later (tested: 6.4, 7.10; 8.x untested)"
#endif

#if PQXX_VERSION_MAJOR == 6
#include <libpq-fe.h>

#include <new>
#include <pqxx/connectionpolicy>
#endif

// 7.10 and 8 run a prepared statement through exec(pqxx::prepped, pqxx::params).
#define IDEM_PQXX_PREPPED \
  (PQXX_VERSION_MAJOR > 7 || (PQXX_VERSION_MAJOR == 7 && PQXX_VERSION_MINOR >= 10))

namespace idem::postgres::detail {

#if PQXX_VERSION_MAJOR == 6
/// What transactions are opened on.
using Connection = pqxx::connection_base;
#else
using Connection = pqxx::connection;
#endif

// --- Values --------------------------------------------------------------------------------------

/// `b` as a bytea parameter (binary format), viewing `b`: use it before `b` goes.
inline auto bytes_param(std::string_view b) {
#if PQXX_VERSION_MAJOR == 6
  return pqxx::binarystring(b.data(), b.size());
#else
  return pqxx::binary_cast(b.data(), b.size());
#endif
}

/// A bytea field's bytes; empty for NULL.
template <class Field>
std::string field_bytes(const Field& f) {
  if (f.is_null()) return {};
#if PQXX_VERSION_MAJOR == 6
  return pqxx::binarystring(f).str();
#else
#if PQXX_VERSION_MAJOR == 7 && PQXX_VERSION_MINOR < 9
  using Bytes = std::basic_string<std::byte>;  // pqxx::bytes from 7.9
  const auto b = f.template as<Bytes>();
#else
  const auto b = f.template as<pqxx::bytes>();
#endif
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
#endif
}

/// Rows the statement of `r` inserted, updated, deleted or returned; 0 for a statement that
/// reports no count (CREATE TABLE...), whose empty count libpqxx 7 fails to read as a number.
inline long long affected_rows(const pqxx::result& r) {
  try {
    return static_cast<long long>(r.affected_rows());
  } catch (const pqxx::conversion_error&) {
    return 0;
  }
}

// --- Statements ----------------------------------------------------------------------------------

#if PQXX_VERSION_MAJOR != 6
// Integers go as their decimal text, as pqxx::params would send them, and C strings as views:
// params' own template append inlines a std::variant that g++ 12 takes for maybe uninitialised
// (-Wmaybe-uninitialized, a false positive that no pragma here reaches).
template <class T>
void append_param(pqxx::params& p, T&& value) {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_integral_v<U> && !std::is_same_v<U, bool>) {
    p.append(std::to_string(value));
  } else if constexpr (std::is_convertible_v<T, const char*>) {
    p.append(pqxx::zview(value));  // a C string, alive for the call
  } else {
    p.append(std::forward<T>(value));
  }
}

template <class... Args>
pqxx::params make_params(Args&&... args) {
  pqxx::params p;
  p.reserve(sizeof...(args));
  (append_param(p, std::forward<Args>(args)), ...);
  return p;
}
#endif

/// Prepares `sql` under `name` on the server at once (one round trip). libpqxx 6 would otherwise
/// wait for the first use; 7 always prepares at once.
inline void prepare(Connection& c, const std::string& name, const std::string& sql) {
  c.prepare(name, sql);
#if PQXX_VERSION_MAJOR == 6
  c.prepare_now(name);
#endif
}

/// Runs the prepared statement `name` with `args` in `tx`.
template <class... Args>
pqxx::result exec_prepared(pqxx::transaction_base& tx, const std::string& name, Args&&... args) {
#if IDEM_PQXX_PREPPED
  return tx.exec(pqxx::prepped{name}, make_params(std::forward<Args>(args)...));
#elif PQXX_VERSION_MAJOR == 7
  return tx.exec_prepared(name, make_params(std::forward<Args>(args)...));
#else
  return tx.exec_prepared(name, std::forward<Args>(args)...);
#endif
}

/// Runs the prepared statement `name` with a list of parameters, all in text format.
inline pqxx::result exec_prepared_texts(pqxx::transaction_base& tx, const std::string& name,
                                        const std::vector<std::string>& values) {
#if PQXX_VERSION_MAJOR == 6
  return tx.exec_prepared(name, pqxx::prepare::make_dynamic_params(values));
#else
  pqxx::params p;
  p.reserve(values.size());
  for (const std::string& v : values) p.append(pqxx::zview(v));  // views: `values` outlives p
#if IDEM_PQXX_PREPPED
  return tx.exec(pqxx::prepped{name}, p);
#else
  return tx.exec_prepared(name, p);
#endif
#endif
}

/// Runs `sql` with parameters $1, $2... in `tx`.
template <class... Args>
pqxx::result exec_params(pqxx::transaction_base& tx, const std::string& sql, Args&&... args) {
#if IDEM_PQXX_PREPPED
  return tx.exec(sql, make_params(std::forward<Args>(args)...));
#elif PQXX_VERSION_MAJOR == 7
  return tx.exec_params(sql, make_params(std::forward<Args>(args)...));
#else
  return tx.exec_params(sql, std::forward<Args>(args)...);
#endif
}

// --- Connecting ----------------------------------------------------------------------------------

/// One wait of a non-blocking connect: until socket `fd` can be read (`read`) or written;
/// throws pqxx::broken_connection when the connect's time is up.
using ConnectWait = std::function<void(int fd, bool read)>;

#if PQXX_VERSION_MAJOR == 6

/// A libpqxx connection opened through libpq's non-blocking connect, every wait through `wait`,
/// and never reopened by libpqxx (6 would reopen a broken connection on its next use, without
/// its settings, and could send a statement again on the new one).
class ConnectionBase : public pqxx::connection_base {
 protected:
  ConnectionBase(const std::string& conninfo, ConnectWait wait)
      : pqxx::connection_base(policy_), policy_(conninfo, std::move(wait)) {
    init();
    // Set once open: libpqxx's own first activation counts as a reactivation.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    inhibit_reactivation(true);
#pragma GCC diagnostic pop
  }
  ~ConnectionBase() noexcept { close(); }

 private:
  class Policy final : public pqxx::connectionpolicy {
   public:
    Policy(const std::string& conninfo, ConnectWait wait)
        : pqxx::connectionpolicy(conninfo), wait_(std::move(wait)) {}
    handle do_startconnect(handle orig) override {
      if (orig != nullptr) return orig;
      PGconn* conn = PQconnectStart(options().c_str());
      if (conn == nullptr) throw std::bad_alloc();
      try {
        // Before the first PQconnectPoll, wait as for PGRES_POLLING_WRITING (libpq's protocol).
        PostgresPollingStatusType state = PGRES_POLLING_WRITING;
        for (;;) {
          if (PQstatus(conn) == CONNECTION_BAD || state == PGRES_POLLING_FAILED) {
            std::string message = PQerrorMessage(conn);
            while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) {
              message.pop_back();
            }
            throw pqxx::broken_connection(message.empty() ? "connection failed" : message);
          }
          if (state == PGRES_POLLING_OK) return conn;
          wait_(PQsocket(conn), state == PGRES_POLLING_READING);
          state = PQconnectPoll(conn);
        }
      } catch (...) {
        PQfinish(conn);
        throw;
      }
    }

   private:
    ConnectWait wait_;
  };

  Policy policy_;
};

#else

/// A libpqxx connection opened through pqxx::connecting (libpq's non-blocking connect), every
/// wait through `wait`. libpqxx 7 never reopens a connection by itself.
class ConnectionBase : public pqxx::connection {
 protected:
  ConnectionBase(const std::string& conninfo, const ConnectWait& wait)
      : pqxx::connection(open(conninfo, wait)) {}

 private:
  static pqxx::connection open(const std::string& conninfo, const ConnectWait& wait) {
    pqxx::connecting c(conninfo);
    while (!c.done()) {
      wait(c.sock(), c.wait_to_read());
      c.process();
    }
    return std::move(c).produce();
  }
};

#endif

// --- A transaction driven by hand ----------------------------------------------------------------

/// A pqxx::dbtransaction that sends nothing by itself: its owner sends BEGIN in front of the
/// transaction's first statement (send() or exec()), then calls begun(); commit() sends what
/// the owner's `commit` function sends; abort() and the destructor send ROLLBACK once begun()
/// was called, nothing before.
///
/// A failed statement leaves the transaction to the server, open and aborted (libpqxx 6 would
/// roll it back at once; 7 leaves it too): a savepoint taken before it can still be rolled back
/// to. Handlers use it as the pqxx::dbtransaction it is (exec, subtransactions).
class ManualTransaction final : public pqxx::dbtransaction {
 public:
  ManualTransaction(Connection& conn, std::function<void()> commit)
#if PQXX_VERSION_MAJOR == 6
      : namedclass{"idem::ManualTransaction"},
        pqxx::dbtransaction(conn, pqxx::isolation_traits<pqxx::read_committed>::name(),
                            pqxx::read_write),
        commit_(std::move(commit)) {
    Begin();  // only libpqxx's state: do_begin() sends nothing
  }
#else
      // No rollback command until begun().
      : pqxx::dbtransaction(conn, std::string_view{}, std::shared_ptr<std::string>{}),
        commit_(std::move(commit)) {
    register_transaction();
  }
#endif
  ManualTransaction(const ManualTransaction&) = delete;
  ManualTransaction& operator=(const ManualTransaction&) = delete;
  ~ManualTransaction() noexcept override {
#if PQXX_VERSION_MAJOR == 6
    End();
#else
    close();
#endif
  }

  /// From now on, ending the transaction without commit() sends ROLLBACK.
  void begun() {
    begun_ = true;
#if PQXX_VERSION_MAJOR != 6
    set_rollback_cmd(std::make_shared<std::string>("ROLLBACK"));
#endif
  }

  /// Sends `sql` on the connection as it is, past libpqxx's checks of the transaction's state
  /// (for the commit function: the transaction is ending).
  pqxx::result send(const std::string& sql) {
#if PQXX_VERSION_MAJOR == 6
    return direct_exec(sql.c_str());
#elif PQXX_VERSION_MAJOR == 7
    return direct_exec(sql);
#else
    return direct_exec(sql, pqxx::sl::current());
#endif
  }

 private:
#if PQXX_VERSION_MAJOR == 6
  void do_begin() override {}
  // 6's own do_exec() rolls the transaction back when a statement fails.
  pqxx::result do_exec(const char* query) override { return direct_exec(query); }
  void do_commit() override { commit_(); }
  void do_abort() override {
    if (begun_) dbtransaction::do_abort();  // ROLLBACK
  }
#elif PQXX_VERSION_MAJOR == 7
  void do_commit() override { commit_(); }
#else
  void do_commit(pqxx::sl) override { commit_(); }
#endif

  std::function<void()> commit_;
  bool begun_ = false;
};

}  // namespace idem::postgres::detail
