#pragma once
// Where libpqxx 6.4 and 7 differ, so the rest of the adapter is written once. 7.7-7.9 get the
// calls 7.10 deprecated; the 8.x side follows 8's headers, unbuilt (docs/sql.md#libpqxx-versions).

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
using Connection = pqxx::connection_base;
#else
using Connection = pqxx::connection;
#endif

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

#if PQXX_VERSION_MAJOR != 6
// Integers as text and C strings as views: params' own append inlines a std::variant that g++ 12
// takes for maybe uninitialised (a false positive no pragma here reaches).
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

/// Prepares `sql` under `name` on the server at once (6 would wait for the first use).
inline void prepare(Connection& c, const std::string& name, const std::string& sql) {
  c.prepare(name, sql);
#if PQXX_VERSION_MAJOR == 6
  c.prepare_now(name);
#endif
}

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

/// The prepared statement `name` with parameters all in text format.
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

/// One wait of a non-blocking connect on socket `fd`; throws pqxx::broken_connection when the
/// connect's time is up.
using ConnectWait = std::function<void(int fd, bool read)>;

#if PQXX_VERSION_MAJOR == 6

/// A connection opened by libpq's non-blocking connect, waiting through `wait`, never reopened
/// (6 would reopen a broken one without its settings and could send a statement again).
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
        PostgresPollingStatusType state = PGRES_POLLING_WRITING;  // libpq's rule for the start
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

/// The same through pqxx::connecting; libpqxx 7 never reopens a connection by itself.
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

/// A pqxx::dbtransaction that sends nothing by itself: its owner sends BEGIN with the first
/// statement and calls begun(); commit() runs the owner's `commit`; abort() sends ROLLBACK once
/// begun. A failed statement leaves the transaction open and aborted (6 would roll it back), so
/// a savepoint taken before it can still be rolled back to.
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

  /// Sends `sql` past libpqxx's checks of the transaction's state (it is ending).
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
