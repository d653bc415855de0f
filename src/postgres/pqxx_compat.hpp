#pragma once
// libpqxx where a handler meets it: its view of the claim's connection and transaction, written
// once for 6.4 and 7 (7.7-7.9 get the calls 7.10 deprecated; the 8.x side follows 8's headers,
// unbuilt: docs/sql.md#libpqxx-versions). Everything else the store sends goes through libpq
// (pg_link.hpp).

#include <libpq-fe.h>

#include <functional>
#include <memory>
#include <pqxx/pqxx>
#include <pqxx/version>
#include <string>
#include <string_view>
#include <utility>

#if PQXX_VERSION_MAJOR < 6 || (PQXX_VERSION_MAJOR == 6 && PQXX_VERSION_MINOR < 4) || \
    (PQXX_VERSION_MAJOR == 7 && PQXX_VERSION_MINOR < 7) || PQXX_VERSION_MAJOR > 8
#error \
    "idem's PostgreSQL adapter needs libpqxx 6.4, or 7.7 or later (tested: 6.4, 7.10; 8.x untested)"
#endif

#if PQXX_VERSION_MAJOR == 6
#include <pqxx/connectionpolicy>
#endif

namespace idem::postgres::detail {

#if PQXX_VERSION_MAJOR == 6
using Connection = pqxx::connection_base;
#else
using Connection = pqxx::connection;
#endif

/// libpqxx's view of a PGconn that stays its owner's: libpqxx neither reconnects nor closes it.
class AdoptedConnection final {
 public:
  explicit AdoptedConnection(PGconn* conn);
  AdoptedConnection(const AdoptedConnection&) = delete;
  AdoptedConnection& operator=(const AdoptedConnection&) = delete;
  ~AdoptedConnection();

  Connection& get() noexcept { return *conn_; }

 private:
#if PQXX_VERSION_MAJOR == 6
  // A connectionpolicy that lends `conn` and lets go of it without closing it.
  class Lent final : public pqxx::connectionpolicy {
   public:
    explicit Lent(PGconn* conn) : pqxx::connectionpolicy(std::string{}), conn_(conn) {}
    handle do_startconnect(handle orig) override { return orig != nullptr ? orig : conn_; }
    handle do_disconnect(handle) noexcept override { return nullptr; }

   private:
    PGconn* conn_;
  };
  class Adopted final : public pqxx::connection_base {
   public:
    explicit Adopted(PGconn* conn) : pqxx::connection_base(policy_), policy_(conn) {
      init();
      // Set once open: libpqxx's own first activation counts as a reactivation.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
      inhibit_reactivation(true);
#pragma GCC diagnostic pop
    }
    ~Adopted() noexcept { close(); }

   private:
    Lent policy_;
  };
  std::unique_ptr<Adopted> conn_;
#else
  std::unique_ptr<pqxx::connection> conn_;
#endif
  PGconn* raw_;
};

#if PQXX_VERSION_MAJOR == 6
inline AdoptedConnection::AdoptedConnection(PGconn* conn)
    : conn_(std::make_unique<Adopted>(conn)), raw_(conn) {}
#else
inline AdoptedConnection::AdoptedConnection(PGconn* conn)
    : conn_(std::make_unique<pqxx::connection>(pqxx::connection::seize_raw_connection(conn))),
      raw_(conn) {}
#endif

inline AdoptedConnection::~AdoptedConnection() {
#if PQXX_VERSION_MAJOR != 6
  (void)std::move(*conn_).release_raw_connection();
#endif
  conn_.reset();
  // libpqxx pointed libpq's notices at its own state, gone now.
  PQsetNoticeProcessor(
      raw_, [](void*, const char*) {}, nullptr);
}

/// A pqxx::dbtransaction that sends nothing by itself: its owner sends BEGIN, COMMIT and
/// ROLLBACK; commit() runs the owner's `commit`. A failed statement leaves the transaction open
/// and aborted (6 would roll it back), so a savepoint taken before it can still be rolled back to.
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
      // No rollback command: ending the transaction sends nothing.
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

 private:
#if PQXX_VERSION_MAJOR == 6
  void do_begin() override {}
  // 6's own do_exec() rolls the transaction back when a statement fails.
  pqxx::result do_exec(const char* query) override { return direct_exec(query); }
  void do_commit() override { commit_(); }
  void do_abort() override {}
#elif PQXX_VERSION_MAJOR == 7
  void do_commit() override { commit_(); }
#else
  void do_commit(pqxx::sl) override { commit_(); }
#endif

  std::function<void()> commit_;
};

}  // namespace idem::postgres::detail
