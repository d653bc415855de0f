// PostgresStore and AsyncPostgresStore over TLS, against the server scripts/lib/servers.sh starts
// in TLS mode (IDEM_PG_TLS_DIR=DIR start_postgres: IDEM_TEST_PG_URI with sslmode=verify-full, and
// IDEM_TEST_PG_TLS_DIR, the test authority's folder). verify-full with the right authority
// connects, with or without a client certificate; a wrong authority, an expired server
// certificate, a wrong host name, a client certificate of another authority, a missing one, an
// unusable sslrootcert and a server without TLS are each refused with store_unavailable and a
// message that says which, and nothing runs. The cases that point the server at another
// certificate, or turn its TLS off, change it for everyone: the executable runs alone
// (RUN_SERIAL) and puts the server back after each.

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <cstdlib>
#include <future>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "idem/asio/async_guard.hpp"
#include "idem/guard.hpp"
#include "idem/postgres/async_store.hpp"
#include "idem/postgres/store.hpp"
#include "support/pg_env.hpp"

namespace idem::testing {
namespace {

namespace net = boost::asio;
using namespace std::chrono_literals;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

// The URI's parts before its query string, and its port.
std::string without_query(const std::string& uri) { return uri.substr(0, uri.find('?')); }
std::string port_of(const std::string& uri) {
  const std::string base = without_query(uri);
  const auto colon = base.rfind(':');
  return base.substr(colon + 1, base.find('/', colon) - colon - 1);
}

// A table prefix of its own per call.
std::string tables() {
  static int n = 0;
  return "tls_" + std::to_string(::getpid()) + "_" + std::to_string(n++) + "_";
}

struct Answer {
  std::error_code code;
  std::string message;
  int runs = 0;
};

// One call of each store's guard on `uri`.
Answer blocking_call(const std::string& uri) {
  PostgresStore store(PostgresStoreOptions{
      .connection = {.uri = uri, .table_prefix = tables(), .connect_timeout = 5s}});
  IdempotencyGuard guard{store, Options{.scope = "tls"}};
  Answer a;
  auto out = guard.execute("k", [&] { return ++a.runs; });
  if (!out) {
    a.code = out.error();
    a.message = out.message();
  }
  return a;
}

Answer async_call(const std::string& uri) {
  net::io_context io;
  AsyncPostgresStore store(
      io.get_executor(),
      AsyncPostgresStoreOptions{
          .connection = {.uri = uri, .table_prefix = tables(), .connect_timeout = 5s}});
  AsyncGuard guard{store, Options{.scope = "tls"}};
  Answer a;
  auto call = [&]() -> net::awaitable<Answer> {
    auto out =
        co_await guard.async_execute("k", [&]() -> net::awaitable<int> { co_return ++a.runs; });
    Answer got;
    got.runs = a.runs;
    if (!out) {
      got.code = out.error();
      got.message = out.message();
    }
    co_return got;
  };
  std::future<Answer> done = net::co_spawn(io, call(), net::use_future);
  // The store keeps the context busy (its connection, its watchdog): run it to the call's end.
  while (done.wait_for(0s) != std::future_status::ready) io.run_one_for(5ms);
  return done.get();
}

class PostgresTls : public ::testing::Test {
 protected:
  void SetUp() override {
    uri_ = env("IDEM_TEST_PG_URI");
    dir_ = env("IDEM_TEST_PG_TLS_DIR");
    if (uri_.empty() || dir_.empty()) {
      GTEST_SKIP() << "IDEM_TEST_PG_URI and IDEM_TEST_PG_TLS_DIR: a server in TLS mode "
                      "(IDEM_PG_TLS_DIR=DIR start_postgres, scripts/lib/servers.sh)";
    }
    port_ = port_of(uri_);
  }
  void TearDown() override {
    if (changed_) restore();  // also after a failed expectation: the server is everyone's
  }

  // The server's URI with another query string (TLS settings).
  std::string with(const std::string& query, const std::string& user = "postgres") const {
    std::string base = without_query(uri_);
    base.replace(base.find("postgres@"), 9, user + "@");
    return base + "?" + query;
  }
  std::string file(const std::string& name) const { return dir_ + "/" + name; }
  std::string verify_full(const std::string& authority) const {
    return "sslmode=verify-full&sslrootcert=" + file(authority);
  }

  // Both stores refuse `uri`: store_unavailable, a message with `words`, the handler not run.
  static void expect_refused(const std::string& uri, const std::string& words) {
    for (const auto& [face, a] : {std::pair{"PostgresStore", blocking_call(uri)},
                                  std::pair{"AsyncPostgresStore", async_call(uri)}}) {
      SCOPED_TRACE(face);
      EXPECT_EQ(a.code, errc::store_unavailable) << a.message;
      EXPECT_NE(a.message.find(words), std::string::npos) << a.message;
      EXPECT_EQ(a.runs, 0);
    }
  }
  static void expect_served(const std::string& uri) {
    for (const auto& [face, a] : {std::pair{"PostgresStore", blocking_call(uri)},
                                  std::pair{"AsyncPostgresStore", async_call(uri)}}) {
      SCOPED_TRACE(face);
      EXPECT_FALSE(a.code) << a.message;
      EXPECT_EQ(a.runs, 1);
    }
  }

  // Changes the server's settings (ALTER SYSTEM, reload) over a connection opened before, then
  // waits until a new connection with `probe_uri` fails (`refused`) or succeeds (!refused).
  void reconfigure(const std::vector<std::string>& statements, const std::string& probe_uri,
                   bool refused) {
    if (!admin_) admin_.emplace(uri_);
    changed_ = true;
    pqxx::nontransaction run(*admin_);
    for (const std::string& s : statements) run.exec(s);  // ALTER SYSTEM: one statement a call
    run.exec("SELECT pg_reload_conf()");
    for (int i = 0; i < 100; ++i) {  // the postmaster takes the reload in its own time
      try {
        pqxx::connection probe(probe_uri);
        if (!refused) return;
      } catch (const pqxx::broken_connection&) {
        if (refused) return;
      }
      std::this_thread::sleep_for(50ms);
    }
    FAIL() << "the server did not take: " << statements.front();
  }
  // Puts the server's TLS settings back as servers.sh made them.
  void restore() {
    reconfigure({"ALTER SYSTEM RESET ssl", "ALTER SYSTEM RESET ssl_cert_file",
                 "ALTER SYSTEM RESET ssl_key_file"},
                uri_, /*refused=*/false);
    changed_ = false;
  }

  std::string uri_, dir_, port_;
  std::optional<pqxx::connection> admin_;
  bool changed_ = false;
};

TEST_F(PostgresTls, VerifyFullWithTheRightAuthorityConnectsBothStores) {
  ASSERT_NE(uri_.find("sslmode=verify-full"), std::string::npos) << uri_;
  expect_served(uri_);
  // verify-full never falls back to plaintext; and the connection says so itself.
  pqxx::connection c(uri_);
  EXPECT_EQ(pqxx::nontransaction(c)
                .exec("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")[0][0]
                .as<bool>(),
            true);
}

TEST_F(PostgresTls, AnotherAuthorityIsRefusedAsAWrongCa) {
  expect_refused(with(verify_full("other-ca.crt")), "wrong CA");
}

TEST_F(PostgresTls, AWrongHostNameIsRefused) {
  // hostaddr connects where the certificate is for; host is the name checked against it.
  const std::string uri =
      "host=wrong.example hostaddr=127.0.0.1 port=" + port_ +
      " dbname=idem_test user=postgres sslmode=verify-full sslrootcert=" + file("ca.crt");
  expect_refused(uri, "wrong host name");
  expect_refused(uri, "wrong.example");
}

TEST_F(PostgresTls, AnUnusableSslrootcertIsNamed) {
  expect_refused(with("sslmode=verify-full&sslrootcert=" + file("no-such.crt")),
                 "TLS settings: sslrootcert cannot be used");
}

// The role idem-client logs in by its certificate alone (pg_hba.conf: cert).
TEST_F(PostgresTls, AClientCertificateOfTheAuthorityLogsInAndOneOfAnotherIsRefused) {
  {
    pqxx::connection c(uri_);
    pqxx::nontransaction(c).exec(
        "DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'idem-client') THEN "
        "CREATE ROLE \"idem-client\" LOGIN; END IF; END$$; "
        "GRANT CREATE ON SCHEMA public TO \"idem-client\"");
  }
  const std::string good =
      verify_full("ca.crt") + "&sslcert=" + file("client.crt") + "&sslkey=" + file("client.key");
  expect_served(with(good, "idem-client"));
  const std::string other = verify_full("ca.crt") + "&sslcert=" + file("other-client.crt") +
                            "&sslkey=" + file("other-client.key");
  expect_refused(with(other, "idem-client"), "the server refused the client certificate");
  expect_refused(with(verify_full("ca.crt"), "idem-client"),
                 "the server requires a client certificate");
}

TEST_F(PostgresTls, AnExpiredServerCertificateIsRefusedAsExpired) {
  pqxx::connection c(uri_);
  const std::string cert = pqxx::nontransaction(c).exec("SHOW ssl_cert_file")[0][0].c_str();
  const std::string folder = cert.substr(0, cert.rfind('/') + 1);  // servers.sh's copies
  reconfigure({"ALTER SYSTEM SET ssl_cert_file = '" + folder + "expired.crt'",
               "ALTER SYSTEM SET ssl_key_file = '" + folder + "expired.key'"},
              uri_, /*refused=*/true);
  expect_refused(uri_, "the server's certificate has expired");
  restore();
  expect_served(uri_);
}

TEST_F(PostgresTls, AServerWithoutTlsFailsClearlyWhenTlsIsRequired) {
  const std::string require = with("sslmode=require");
  reconfigure({"ALTER SYSTEM SET ssl = off"}, require, /*refused=*/true);
  expect_refused(require, "the server does not offer TLS");
  expect_refused(uri_, "the server does not offer TLS");
  restore();
  expect_served(require);
}

}  // namespace
}  // namespace idem::testing
