// Everything idem prints, gathered from the stores driven through succeeding and failing paths
// with a password found nowhere else: every failure's message (and describe()), the idem
// command's stdout and stderr, the Prometheus exposition text (events and the stores' own
// figures) and the spdlog observer's lines. None may hold the password, raw or URL-encoded, nor
// the bytes of the key the calls used (a log line names a key by a hash of its id).
//
// The paths: a login that works, a wrong password, a port nobody listens on, a right the user
// lacks, a TLS file that cannot be used, a URI that does not parse, the admin API, and the
// command with its password in a file, in the environment and in IDEM_STORE. PostgreSQL's
// password logins need the test server's password group (scripts/lib/servers.sh
// IDEM_TEST_PG_PASSWORD_GROUP), whose members the server asks for a password.

#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli_run.hpp"
#include "idem/guard.hpp"
#include "idem/prometheus.hpp"
#include "idem/spdlog.hpp"
#ifdef IDEM_TEST_WITH_POSTGRES
#include <pqxx/pqxx>

#include "idem/postgres/admin.hpp"
#include "idem/postgres/store.hpp"
#endif
#ifdef IDEM_TEST_WITH_REDIS
#include "idem/redis/admin.hpp"
#include "idem/redis/client.hpp"
#include "idem/redis/store.hpp"
#endif

namespace {

using idem::testing::CliRun;
using idem::testing::idem_cli;
using idem::testing::q;

const std::string kPid = std::to_string(::getpid());
// Characters a URI must escape, so that the encoded form differs from the raw one.
const std::string kPassword = "Pw-" + kPid + "-q/z@k:%x";
const std::string kWrong = "Wg-" + kPid + "-r/y@j:%w";
const std::string kKeyId = "KeyBytes-" + kPid + "-vQ";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::string url_encoded(const std::string& s) {
  constexpr std::string_view kHex = "0123456789ABCDEF";
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 0xF];
    }
  }
  return out;
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
  static std::string next_path() {
    static int made = 0;
    return "/tmp/idem_secrets_shown_" + kPid + "_" + std::to_string(made++);
  }
  std::string path_ = next_path();
};

// What idem printed, each with where it came from, and the observer that feeds the metrics and
// the log.
class Shown {
 public:
  Shown() {
    logger_->set_level(spdlog::level::trace);
    logger_->set_pattern("%v");
  }

  std::shared_ptr<idem::Observer> observer() { return metrics_.observer(idem_log_); }
  idem::PrometheusMetrics& metrics() { return metrics_; }

  void add(std::string where, std::string text) {
    texts_.emplace_back(std::move(where), std::move(text));
  }
  void add(const std::string& where, const CliRun& r) {
    add(where + ": stdout", r.out);
    add(where + ": stderr", r.err);
  }
  template <class R>
  void add_failure(const std::string& where, const R& result) {
    ASSERT_FALSE(result) << where;
    add(where, result.failure().message);
    add(where + " (describe)", result.failure().describe());
  }

  std::string log() const { return log_.str(); }

  // Adds the metrics and the log, then looks for each secret in everything.
  void expect_nothing_secret() {
    add("prometheus text", metrics_.text());
    add("spdlog lines", log());
    for (const std::string& secret :
         {kPassword, url_encoded(kPassword), kWrong, url_encoded(kWrong), kKeyId}) {
      for (const auto& [where, text] : texts_) {
        EXPECT_EQ(text.find(secret), std::string::npos) << where << " shows '" << secret << "':\n"
                                                        << text;
      }
    }
  }

 private:
  std::ostringstream log_;
  std::shared_ptr<spdlog::logger> logger_ = std::make_shared<spdlog::logger>(
      "secrets", std::make_shared<spdlog::sinks::ostream_sink_st>(log_));
  idem::Observer::Callback idem_log_ = idem::spdlog_callback(logger_);
  idem::PrometheusMetrics metrics_{std::make_shared<prometheus::Registry>()};
  std::vector<std::pair<std::string, std::string>> texts_;
};

// One guard call on `store` with the distinctive key; its failure (if any) is added to `shown`.
template <class Store>
idem::Outcome<int> call(Shown& shown, const std::string& where, Store& store) {
  idem::IdempotencyGuard guard{
      store, idem::Options{.scope = "secrets.shown", .observer = shown.observer()}};
  auto out = guard.execute(idem::Key{kKeyId, "tenant-" + kPid}, "payload", [] { return 42; });
  if (!out) {
    shown.add(where, out.message());
    shown.add(where + " (error)", out.error().message());
  }
  return out;
}

#ifdef IDEM_TEST_WITH_REDIS
TEST(SecretsShown, RedisShowsNeitherThePasswordNorTheKey) {
  const std::string uri = env("IDEM_TEST_REDIS_URI");
  if (uri.empty()) GTEST_SKIP() << "IDEM_TEST_REDIS_URI is not set (scripts/test starts a server)";
  auto admin_options = idem::redis::ConnectionOptions::from_uri(uri);
  ASSERT_TRUE(admin_options) << admin_options.failure().message;
  idem::redis::Client admin(admin_options.value());
  const std::string user = "idem_shown_" + kPid;
  const std::string password_rule = ">" + kPassword;
  ASSERT_TRUE(
      admin.command({"ACL", "SETUSER", user, "reset", "on", password_rule, "~*", "&*", "+@all"}));
  struct DropUser {
    idem::redis::Client& admin;
    const std::string& user;
    ~DropUser() { (void)admin.command({"ACL", "DELUSER", user}); }
  } drop{admin, user};
  // The test server's scheme and TLS settings kept (rediss:// in the TLS stage).
  const std::size_t after_scheme = uri.find("://") + 3;
  const std::string scheme = uri.substr(0, after_scheme);
  const std::string host = uri.substr(after_scheme);
  const std::string with_password = scheme + user + ":" + url_encoded(kPassword) + "@" + host;

  Shown shown;
  auto parsed = idem::redis::ConnectionOptions::from_uri(with_password);
  ASSERT_TRUE(parsed) << parsed.failure().message;
  const idem::redis::ConnectionOptions good = parsed.value();
  EXPECT_EQ(good.password, kPassword);

  // Served: a fresh call and its replay.
  auto serving_client = std::make_shared<idem::redis::Client>(good);
  idem::RedisStore serving{serving_client};
  shown.metrics().watch_store("served", serving);
  ASSERT_TRUE(call(shown, "redis served", serving));
  ASSERT_TRUE(call(shown, "redis replayed", serving).replayed());

  idem::redis::ConnectionOptions wrong = good;
  wrong.password = kWrong;
  auto wrong_client = std::make_shared<idem::redis::Client>(wrong);
  idem::RedisStore refused{wrong_client};
  shown.metrics().watch_store("refused", refused);
  const auto refused_out = call(shown, "redis wrong password", refused);
  ASSERT_FALSE(refused_out);
  EXPECT_EQ(refused_out.error(), idem::errc::store_unavailable);
  EXPECT_NE(refused_out.message().find("WRONGPASS"), std::string::npos) << refused_out.message();

  idem::redis::ConnectionOptions nobody = good;
  nobody.host = "127.0.0.1";
  nobody.port = 1;
  idem::RedisStore unreachable{std::make_shared<idem::redis::Client>(nobody)};
  EXPECT_FALSE(call(shown, "redis unreachable", unreachable));

  ASSERT_TRUE(admin.command({"ACL", "SETUSER", user, "-evalsha"}));
  idem::RedisStore lacking{std::make_shared<idem::redis::Client>(good)};
  const auto lacking_out = call(shown, "redis right missing", lacking);
  ASSERT_TRUE(admin.command({"ACL", "SETUSER", user, "+evalsha"}));
  ASSERT_FALSE(lacking_out);
  EXPECT_EQ(lacking_out.error(), idem::errc::config_invalid);

  idem::redis::ConnectionOptions unusable_tls = good;
  unusable_tls.tls.enabled = true;
  unusable_tls.tls.ca_file = "/nonexistent/idem-ca.crt";
  idem::RedisStore no_tls{std::make_shared<idem::redis::Client>(unusable_tls)};
  const auto tls_out = call(shown, "redis TLS file unusable", no_tls);
  ASSERT_FALSE(tls_out);
  EXPECT_EQ(tls_out.error(), idem::errc::config_invalid);

  shown.add_failure("redis URI with a bad port",
                    idem::redis::ConnectionOptions::from_uri(
                        scheme + user + ":" + url_encoded(kPassword) + "@127.0.0.1:notaport"));
  shown.add_failure("redis URI with a bad database",
                    idem::redis::ConnectionOptions::from_uri(
                        scheme + user + ":" + url_encoded(kPassword) + "@127.0.0.1:1/notadb"));
  shown.add_failure(
      "redis cluster URI with a database",
      idem::redis::ClusterOptions::from_uri("redis+cluster://" + user + ":" +
                                            url_encoded(kPassword) + "@127.0.0.1:1/3"));
  shown.add_failure("redis admin, wrong password",
                    idem::admin::redis_admin(wrong_client)->stats("secrets.shown"));

  // The command: the password from a file, from the environment, and in IDEM_STORE's URI.
  const std::string as_user = scheme + user + ":@" + host;
  const PasswordFile right(kPassword);
  const PasswordFile wrong_file(kWrong);
  const CliRun served = idem_cli("--store " + q(as_user) + " --password-file " + q(right.path()) +
                                 " --scope secrets.shown stats");
  EXPECT_EQ(served.status, 0) << served.err;
  shown.add("idem stats", served);
  const CliRun refused_cli = idem_cli("--store " + q(as_user) + " --password-file " +
                                      q(wrong_file.path()) + " --scope secrets.shown stats");
  EXPECT_EQ(refused_cli.status, 3) << refused_cli.err;
  EXPECT_NE(refused_cli.err.find("WRONGPASS"), std::string::npos) << refused_cli.err;
  shown.add("idem stats, wrong password", refused_cli);
  ::setenv("IDEM_STORE_PASSWORD", kPassword.c_str(), 1);
  const CliRun nobody_cli =
      idem_cli("--store " + q(scheme + user + ":@127.0.0.1:1") + " --scope secrets.shown stats");
  ::unsetenv("IDEM_STORE_PASSWORD");
  EXPECT_EQ(nobody_cli.status, 3) << nobody_cli.err;
  shown.add("idem stats, unreachable", nobody_cli);
  ::setenv("IDEM_STORE", (scheme + user + ":" + url_encoded(kWrong) + "@" + host).c_str(), 1);
  const CliRun whole = idem_cli("stats --all-scopes");
  ::unsetenv("IDEM_STORE");
  EXPECT_EQ(whole.status, 3) << whole.err;
  shown.add("idem stats, IDEM_STORE with a wrong password", whole);

  // The observer heard the calls: the log names the failures and the metrics count them.
  EXPECT_NE(shown.log().find("store_error"), std::string::npos) << shown.log();
  EXPECT_NE(shown.log().find("key=#"), std::string::npos) << shown.log();
  EXPECT_NE(shown.metrics().text().find("scope=\"secrets.shown\""), std::string::npos);
  shown.expect_nothing_secret();
}
#endif

#ifdef IDEM_TEST_WITH_POSTGRES
// A role of its own that the server asks for a password (a member of the password group), with
// row rights on tables of its own.
class PostgresPasswordRole : public ::testing::Test {
 protected:
  void SetUp() override {
    uri_ = env("IDEM_TEST_PG_URI");
    if (uri_.empty()) GTEST_SKIP() << "IDEM_TEST_PG_URI is not set (scripts/test starts a server)";
    const std::string group = env("IDEM_TEST_PG_PASSWORD_GROUP");
    if (group.empty()) {
      GTEST_SKIP() << "IDEM_TEST_PG_PASSWORD_GROUP is not set: the server must ask the group's "
                      "members for a password (scripts/lib/servers.sh start_postgres)";
    }
    role_ = "idem_shown_" + kPid;
    prefix_ = "shown_" + kPid + "_";
    ASSERT_TRUE(idem::admin::postgres_admin({.connection = {.uri = uri_, .table_prefix = prefix_}})
                    ->migrate_schema());
    const std::string& p = prefix_;
    run("DROP ROLE IF EXISTS " + role_ + "; CREATE ROLE " + role_ + " LOGIN PASSWORD '" +
        kPassword + "' IN ROLE " + group + "; GRANT SELECT ON " + p + "schema TO " + role_ +
        "; GRANT SELECT, INSERT, UPDATE, DELETE ON " + p + "records, " + p + "steps, " + p +
        "entity_ops TO " + role_ + "; GRANT USAGE ON SEQUENCE " + p + "fences, " + p +
        "entity_fences TO " + role_);
  }
  void TearDown() override {
    if (role_.empty()) return;
    run("DROP OWNED BY " + role_ + "; DROP ROLE " + role_);
  }
  void run(const std::string& sql) const {
    pqxx::connection c(uri_);
    pqxx::work w(c);
    w.exec(sql);
    w.commit();
  }
  // The test server's URI as the role, with `password` in it (none: without one).
  std::string as_role(const std::string& password) const {
    std::string uri = uri_;
    const std::string login = password.empty() ? role_ : role_ + ":" + url_encoded(password);
    uri.replace(uri.find("postgres@"), 9, login + "@");
    return uri;
  }
  static std::string with_parameter(const std::string& uri, const std::string& parameter) {
    return uri + (uri.find('?') == std::string::npos ? "?" : "&") + parameter;
  }
  idem::PostgresStoreOptions options(std::string uri) const {
    return idem::PostgresStoreOptions{
        .connection = {.uri = std::move(uri), .table_prefix = prefix_}};
  }

  std::string uri_, role_, prefix_;
};

TEST_F(PostgresPasswordRole, AWrongPasswordIsRefusedNamingTheCauseNotThePassword) {
  idem::PostgresStore store(options(as_role(kWrong)));
  Shown shown;
  const auto out = call(shown, "postgres wrong password", store);
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error(), idem::errc::store_unavailable) << out.message();
  EXPECT_NE(out.message().find("authentication failed: the server refused the role's password"),
            std::string::npos)
      << out.message();
  EXPECT_NE(out.message().find(role_), std::string::npos) << out.message();
  // No password at all, where the server asks for one.
  idem::PostgresStore none(options(as_role("")));
  const auto none_out = call(shown, "postgres no password", none);
  ASSERT_FALSE(none_out);
  EXPECT_EQ(none_out.error(), idem::errc::store_unavailable) << none_out.message();
  EXPECT_NE(none_out.message().find("authentication failed"), std::string::npos)
      << none_out.message();
  shown.expect_nothing_secret();
}

TEST_F(PostgresPasswordRole, PostgresShowsNeitherThePasswordNorTheKey) {
  Shown shown;
  idem::PostgresStore serving(options(as_role(kPassword)));
  shown.metrics().watch_store("served", serving);
  ASSERT_TRUE(call(shown, "postgres served", serving));
  ASSERT_TRUE(call(shown, "postgres replayed", serving).replayed());

  idem::PostgresStore refused(options(as_role(kWrong)));
  shown.metrics().watch_store("refused", refused);
  EXPECT_FALSE(call(shown, "postgres wrong password", refused));

  idem::PostgresStore unreachable(options("postgresql://" + role_ + ":" + url_encoded(kPassword) +
                                          "@127.0.0.1:1/idem_test?connect_timeout=2"));
  EXPECT_FALSE(call(shown, "postgres unreachable", unreachable));

  idem::PostgresStore unusable_tls(options(with_parameter(
      as_role(kPassword), "sslmode=verify-full&sslrootcert=/nonexistent/idem-ca.crt")));
  EXPECT_FALSE(call(shown, "postgres TLS file unusable", unusable_tls));

  run("REVOKE INSERT ON " + prefix_ + "records FROM " + role_);
  idem::PostgresStore lacking(options(as_role(kPassword)));
  const auto lacking_out = call(shown, "postgres right missing", lacking);
  ASSERT_FALSE(lacking_out);
  EXPECT_EQ(lacking_out.error(), idem::errc::config_invalid);

  try {
    idem::PostgresStore bad(options(as_role(kPassword) + "%zz"));
    ADD_FAILURE() << "a URI libpq cannot read was taken";
  } catch (const std::invalid_argument& e) {
    shown.add("postgres URI libpq cannot read", e.what());
  }
  shown.add_failure(
      "postgres admin, wrong password",
      idem::admin::postgres_admin({.connection = {.uri = as_role(kWrong), .table_prefix = prefix_}})
          ->stats("secrets.shown"));

  // The command: the password from a file and from the environment, and a wrong one.
  const PasswordFile right(kPassword);
  const PasswordFile wrong_file(kWrong);
  const std::string without = as_role("");
  const CliRun served = idem_cli("--store " + q(without) + " --table-prefix " + q(prefix_) +
                                 " --password-file " + q(right.path()) + " schema check");
  EXPECT_EQ(served.status, 0) << served.err;
  shown.add("idem schema check", served);
  const CliRun refused_cli = idem_cli("--store " + q(without) + " --table-prefix " + q(prefix_) +
                                      " --password-file " + q(wrong_file.path()) + " schema check");
  EXPECT_EQ(refused_cli.status, 3) << refused_cli.err;
  EXPECT_NE(refused_cli.err.find("authentication failed"), std::string::npos) << refused_cli.err;
  shown.add("idem schema check, wrong password", refused_cli);
  ::setenv("IDEM_STORE_PASSWORD", kWrong.c_str(), 1);
  const CliRun from_env = idem_cli("--store " + q(without) + " --table-prefix " + q(prefix_) +
                                   " --scope secrets.shown stats");
  ::unsetenv("IDEM_STORE_PASSWORD");
  EXPECT_EQ(from_env.status, 3) << from_env.err;
  shown.add("idem stats, wrong password from the environment", from_env);

  EXPECT_NE(shown.log().find("store_error"), std::string::npos) << shown.log();
  EXPECT_NE(shown.metrics().text().find("scope=\"secrets.shown\""), std::string::npos);
  shown.expect_nothing_secret();
}
#endif

}  // namespace
