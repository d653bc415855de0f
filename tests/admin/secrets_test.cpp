// Passwords are never shown: the idem command refuses one in its arguments (which every user of
// the machine can read) without echoing it, takes it from --password-file or IDEM_STORE_PASSWORD
// (and the URI from IDEM_STORE), and neither it nor the stores print it on a failing or a
// succeeding path. Each case uses a password found nowhere else, and looks for it in everything
// printed and in every failure's message.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli_run.hpp"
#include "idem/guard.hpp"
#ifdef IDEM_TEST_WITH_POSTGRES
#include <pqxx/pqxx>

#include "idem/postgres/store.hpp"
#endif
#ifdef IDEM_TEST_WITH_REDIS
#include "idem/redis/client.hpp"
#include "idem/redis/store.hpp"
#endif

namespace {

using idem::testing::CliRun;
using idem::testing::idem_cli;
using idem::testing::q;

const std::string kSecret = "Sekr3t-" + std::to_string(::getpid()) + "-qZx";
const std::string kWrong = "Wr0ng-" + std::to_string(::getpid()) + "-pJv";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

void expect_unshown(const CliRun& r) {
  for (const std::string& s : {kSecret, kWrong}) {
    EXPECT_EQ(r.out.find(s), std::string::npos) << r.out;
    EXPECT_EQ(r.err.find(s), std::string::npos) << r.err;
  }
}
void expect_unshown(const std::string& message) {
  EXPECT_EQ(message.find(kSecret), std::string::npos) << message;
  EXPECT_EQ(message.find(kWrong), std::string::npos) << message;
}

// A password file of the owner's alone, removed with the object.
class PasswordFile {
 public:
  explicit PasswordFile(const std::string& password) {
    std::ofstream(path_) << password << '\n';
    std::filesystem::permissions(
        path_, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  }
  PasswordFile(const PasswordFile&) = delete;
  PasswordFile& operator=(const PasswordFile&) = delete;
  ~PasswordFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  static inline int n_ = 0;
  std::string path_ =
      "/tmp/idem_secrets_test_" + std::to_string(::getpid()) + "_" + std::to_string(n_++);
};

TEST(Secrets, APasswordInTheArgumentsIsRefusedWithoutShowingIt) {
  for (const std::string& uri :
       {"redis://app:" + kSecret + "@127.0.0.1:1", "redis://" + kSecret + "@127.0.0.1:1",
        "redis+cluster://app:" + kSecret + "@127.0.0.1:1",
        "postgresql://app:" + kSecret + "@127.0.0.1:1/db",
        "postgresql://app@127.0.0.1:1/db?password=" + kSecret,
        "host=127.0.0.1 port=1 password=" + kSecret}) {
    SCOPED_TRACE(uri);
    for (const std::string& form : {"--store " + q(uri), q("--store=" + uri)}) {
      const CliRun r = idem_cli(form + " --scope s list");
      EXPECT_EQ(r.status, 2) << r.err;
      EXPECT_NE(r.err.find("IDEM_STORE"), std::string::npos) << r.err;
      expect_unshown(r);
    }
  }
  // Also in a URI of a scheme the command does not know, which is named alone when it comes
  // from IDEM_STORE.
  const CliRun argument = idem_cli(q("--store=mysql://app:" + kSecret + "@h/db") + " stats");
  EXPECT_EQ(argument.status, 2);
  EXPECT_NE(argument.err.find("IDEM_STORE"), std::string::npos) << argument.err;
  expect_unshown(argument);
  ::setenv("IDEM_STORE", ("mysql://app:" + kSecret + "@h/db").c_str(), 1);
  const CliRun unknown = idem_cli("stats --all-scopes");
  ::unsetenv("IDEM_STORE");
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.err.find("unknown store URI scheme 'mysql:'"), std::string::npos)
      << unknown.err;
  expect_unshown(unknown);
  // Two passwords, or one for a store that has none, are usage errors too.
  const PasswordFile file(kSecret);
  ::setenv("IDEM_STORE", ("redis://app:" + kWrong + "@127.0.0.1:1").c_str(), 1);
  const CliRun both = idem_cli("--password-file " + q(file.path()) + " stats --all-scopes");
  ::unsetenv("IDEM_STORE");
  EXPECT_EQ(both.status, 2) << both.err;
  expect_unshown(both);
  const CliRun sqlite =
      idem_cli("--store sqlite:/tmp/none.db --password-file " + q(file.path()) + " stats");
  EXPECT_EQ(sqlite.status, 2) << sqlite.err;
  expect_unshown(sqlite);
}

#ifdef IDEM_TEST_WITH_REDIS
// An ACL user of its own on the test server, with kSecret as its password.
TEST(Secrets, RedisTakesItsPasswordFromAFileOrTheEnvironmentAndNeverShowsIt) {
  const std::string uri = env("IDEM_TEST_REDIS_URI");
  if (uri.empty()) GTEST_SKIP() << "IDEM_TEST_REDIS_URI is not set (scripts/test starts a server)";
  auto admin_options = idem::redis::ConnectionOptions::from_uri(uri);
  ASSERT_TRUE(admin_options) << admin_options.failure().message;
  idem::redis::Client admin(admin_options.value());
  const std::string user = "idem_secrets_" + std::to_string(::getpid());
  const std::string password_rule = ">" + kSecret;
  ASSERT_TRUE(
      admin.command({"ACL", "SETUSER", user, "reset", "on", password_rule, "~*", "&*", "+@all"}));
  struct DropUser {
    idem::redis::Client& admin;
    const std::string& user;
    ~DropUser() { (void)admin.command({"ACL", "DELUSER", user}); }
  } drop{admin, user};
  // The test server's scheme kept: rediss:// (and its TLS settings after the host) in the TLS
  // stage.
  const std::size_t after_scheme = uri.find("://") + 3;
  const std::string scheme = uri.substr(0, after_scheme);
  const std::string host = uri.substr(after_scheme);
  const std::string as_user = scheme + user + ":@" + host;  // the password left out

  const PasswordFile right(kSecret);
  const PasswordFile wrong(kWrong);
  const CliRun served = idem_cli("--store " + q(as_user) + " --password-file " + q(right.path()) +
                                 " stats --all-scopes");
  EXPECT_EQ(served.status, 0) << served.err;
  expect_unshown(served);
  ::setenv("IDEM_STORE_PASSWORD", kSecret.c_str(), 1);
  const CliRun from_env = idem_cli("--store " + q(as_user) + " stats --all-scopes");
  ::unsetenv("IDEM_STORE_PASSWORD");
  EXPECT_EQ(from_env.status, 0) << from_env.err;
  expect_unshown(from_env);
  // The whole URI, password included, from IDEM_STORE: not in the arguments, so taken.
  ::setenv("IDEM_STORE", (scheme + user + ":" + kSecret + "@" + host).c_str(), 1);
  const CliRun whole = idem_cli("stats --all-scopes");
  ::unsetenv("IDEM_STORE");
  EXPECT_EQ(whole.status, 0) << whole.err;
  expect_unshown(whole);
  const CliRun refused = idem_cli("--store " + q(as_user) + " --password-file " + q(wrong.path()) +
                                  " stats --all-scopes");
  EXPECT_EQ(refused.status, 3) << refused.err;
  expect_unshown(refused);

  // The store itself, with the wrong password and then the right one.
  auto options = idem::redis::ConnectionOptions::from_uri(as_user);
  ASSERT_TRUE(options);
  options.value().password = kWrong;
  idem::RedisStore refusing{std::make_shared<idem::redis::Client>(options.value())};
  idem::IdempotencyGuard refusing_guard{refusing, idem::Options{.scope = "secrets"}};
  const auto out = refusing_guard.execute("k", [] { return 1; });
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error(), idem::errc::store_unavailable);
  expect_unshown(out.message());
  options.value().password = kSecret;
  idem::RedisStore serving{std::make_shared<idem::redis::Client>(options.value())};
  idem::IdempotencyGuard serving_guard{serving, idem::Options{.scope = "secrets"}};
  EXPECT_TRUE(serving_guard.execute("k" + std::to_string(::getpid()), [] { return 1; }));
}
#endif

#ifdef IDEM_TEST_WITH_POSTGRES
// A role of its own with kSecret as its password (the test server trusts every local
// connection, so the password is sent but not needed), and a server nobody listens on.
TEST(Secrets, PostgresTakesItsPasswordFromAFileAndNeverShowsIt) {
  const std::string uri = env("IDEM_TEST_PG_URI");
  if (uri.empty()) GTEST_SKIP() << "IDEM_TEST_PG_URI is not set (scripts/test starts a server)";
  const std::string role = "idem_secrets_" + std::to_string(::getpid());
  {
    pqxx::connection c(uri);
    pqxx::nontransaction(c).exec("DROP ROLE IF EXISTS " + role);
    pqxx::nontransaction(c).exec("CREATE ROLE " + role + " LOGIN PASSWORD '" + kSecret + "'");
  }
  std::string as_role = uri;
  as_role.replace(as_role.find("postgres@"), 9, role + "@");
  const PasswordFile right(kSecret);
  const CliRun served =
      idem_cli("--store " + q(as_role) + " --password-file " + q(right.path()) + " schema check");
  // Reached and logged in (the role may have no right on the tables there: not a concern here).
  EXPECT_NE(served.status, 3) << served.err;
  expect_unshown(served);
  const CliRun unreachable =
      idem_cli("--store " + q("postgresql://" + role + "@127.0.0.1:1/idem_test?connect_timeout=2") +
               " --password-file " + q(right.path()) + " schema check");
  EXPECT_EQ(unreachable.status, 3) << unreachable.err;
  expect_unshown(unreachable);

  // The store with the password in its URI: a failing connect, and a failing parse.
  idem::PostgresStore store{idem::PostgresStoreOptions{
      .connection = {.uri = "postgresql://" + role + ":" + kSecret +
                            "@127.0.0.1:1/idem_test?connect_timeout=2"}}};
  idem::IdempotencyGuard guard{store, idem::Options{.scope = "secrets"}};
  const auto out = guard.execute("k", [] { return 1; });
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error(), idem::errc::store_unavailable);
  expect_unshown(out.message());
  try {
    idem::PostgresStore bad{idem::PostgresStoreOptions{
        .connection = {.uri = "postgresql://" + role + ":" + kSecret + "@127.0.0.1:1/db%zz"}}};
    ADD_FAILURE() << "a URI libpq cannot read was taken";
  } catch (const std::invalid_argument& e) {
    expect_unshown(e.what());
  }
  pqxx::connection c(uri);
  pqxx::nontransaction(c).exec("DROP ROLE " + role);
}
#endif

}  // namespace
