// idem-proxy's config file: each class of mistake is one line that names the file, the line and
// column, the field, what is wrong and what is allowed; a valid file sets only what it names.

#include "config_file.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "config_test_support.hpp"

namespace idem::proxy {
namespace {

using testing::defaults_with_upstream;
using testing::describe;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::load;
using ::testing::Not;
using ::testing::SizeIs;
using ::testing::StartsWith;

// `text`, then the upstream's port (which every valid config needs) in a table after it, so that
// the lines of `text` keep their numbers.
std::string with_upstream(std::string_view text) {
  return std::string(text) + "\n[upstream]\nport = 8081\n";
}

TEST(ProxyConfigFile, AnEmptyFileIsTheDefaultsAndNeedsTheUpstreamPort) {
  const auto loaded = load("");
  EXPECT_THAT(loaded.mistakes,
              ElementsAre("proxy.toml: upstream.port: missing: the upstream's port is required "
                          "([upstream] port = 1 to 65535, or --upstream HOST:PORT)"));
  EXPECT_EQ(describe(loaded.config), describe(ProxyConfig{}));
}

TEST(ProxyConfigFile, SettingOneFieldKeepsEveryOtherDefault) {
  const auto loaded = load(with_upstream("[limits]\nbody_bytes = 1024\n"));
  ASSERT_THAT(loaded.mistakes, IsEmpty());
  ProxyConfig expected = defaults_with_upstream();
  expected.limits.body_bytes = 1024;
  EXPECT_EQ(describe(loaded.config), describe(expected));
}

TEST(ProxyConfigFile, EveryFieldIsRead) {
  const auto loaded = load(R"(threads = 4
drain_timeout_ms = 1500
[listen]
address = "0.0.0.0"
port = 0
tls_certificate = "/etc/idem/cert.pem"
tls_private_key = "/etc/idem/key.pem"
tls_client_ca = "/etc/idem/ca.pem"
[upstream]
host = "10.0.0.2"
port = 9000
pool_size = 8
connect_timeout_ms = 100
response_timeout_ms = 200
idle_timeout_ms = 300
[store]
uri = "redis+cluster://10.0.0.3:7000,10.0.0.4:7000"
scope = "payments"
lease_ms = 400
retention_s = 500
cache_entries = 600
cache_ttl_s = 700
[limits]
head_bytes = 1000
body_bytes = 2000
record_bytes = 3000
request_timeout_ms = 4000
keep_alive_timeout_ms = 5000
write_timeout_ms = 6000
max_connections = 7
keep_alive_requests = 8
[principal]
from = "client-certificate"
header = "X-Tenant"
[fingerprint]
headers = ["Content-Type", "X-Request-Kind"]
[failures]
on_5xx = "record"
on_timeout = "record"
on_connect_failure = "record"
unrecorded_status = 507
[duplicates]
wait_ms = 250
[admin]
address = "::1"
port = 9100
[[route]]
method = "PUT"
path = "/orders/*"
key = "honoured"
[[route]]
path = "/payments"
)");
  ASSERT_THAT(loaded.mistakes, IsEmpty());
  const ProxyConfig& c = loaded.config;
  EXPECT_EQ(c.threads, 4u);
  EXPECT_EQ(c.drain_timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(c.listen.address, "0.0.0.0");
  EXPECT_EQ(c.listen.port, 0);
  EXPECT_EQ(c.listen.tls_certificate, "/etc/idem/cert.pem");
  EXPECT_EQ(c.listen.tls_private_key, "/etc/idem/key.pem");
  EXPECT_EQ(c.listen.tls_client_ca, "/etc/idem/ca.pem");
  EXPECT_EQ(c.upstream.host, "10.0.0.2");
  EXPECT_EQ(c.upstream.port, 9000);
  EXPECT_EQ(c.upstream.pool_size, 8u);
  EXPECT_EQ(c.upstream.connect_timeout, std::chrono::milliseconds(100));
  EXPECT_EQ(c.upstream.response_timeout, std::chrono::milliseconds(200));
  EXPECT_EQ(c.upstream.idle_timeout, std::chrono::milliseconds(300));
  EXPECT_EQ(c.store.uri, "redis+cluster://10.0.0.3:7000,10.0.0.4:7000");
  EXPECT_EQ(c.store.scope, "payments");
  EXPECT_EQ(c.store.lease, std::chrono::milliseconds(400));
  EXPECT_EQ(c.store.retention, std::chrono::seconds(500));
  EXPECT_EQ(c.store.cache_entries, 600u);
  EXPECT_EQ(c.store.cache_ttl, std::chrono::seconds(700));
  EXPECT_EQ(c.limits.head_bytes, 1000u);
  EXPECT_EQ(c.limits.body_bytes, 2000u);
  EXPECT_EQ(c.limits.record_bytes, 3000u);
  EXPECT_EQ(c.limits.request_timeout, std::chrono::milliseconds(4000));
  EXPECT_EQ(c.limits.keep_alive_timeout, std::chrono::milliseconds(5000));
  EXPECT_EQ(c.limits.write_timeout, std::chrono::milliseconds(6000));
  EXPECT_EQ(c.limits.max_connections, 7u);
  EXPECT_EQ(c.limits.keep_alive_requests, 8u);
  EXPECT_EQ(c.principal.from, PrincipalSource::client_certificate);
  EXPECT_EQ(c.principal.header, "X-Tenant");
  EXPECT_THAT(c.fingerprint.headers, ElementsAre("Content-Type", "X-Request-Kind"));
  EXPECT_EQ(c.failures.on_5xx, OnFailure::record);
  EXPECT_EQ(c.failures.on_timeout, OnFailure::record);
  EXPECT_EQ(c.failures.on_connect_failure, OnFailure::record);
  EXPECT_EQ(c.failures.unrecorded_status, 507);
  EXPECT_EQ(c.duplicates.wait, std::chrono::milliseconds(250));
  EXPECT_EQ(c.admin.address, "::1");
  EXPECT_EQ(c.admin.port, 9100);
  ASSERT_THAT(c.routes, SizeIs(2));
  EXPECT_EQ(c.routes[0].method, "PUT");
  EXPECT_EQ(c.routes[0].path, "/orders/*");
  EXPECT_EQ(c.routes[0].key, KeyUse::honoured);
  EXPECT_EQ(c.routes[1].method, "POST");  // the defaults of a route
  EXPECT_EQ(c.routes[1].path, "/payments");
  EXPECT_EQ(c.routes[1].key, KeyUse::required);
}

TEST(ProxyConfigFile, NotTomlNamesTheLineAndColumn) {
  const auto loaded = load("threads = 2\n[listen\nport = 1\n");
  ASSERT_THAT(loaded.mistakes, SizeIs(1));
  EXPECT_THAT(loaded.mistakes[0], StartsWith("proxy.toml:2:"));
  EXPECT_THAT(loaded.mistakes[0], HasSubstr("not valid TOML"));
}

TEST(ProxyConfigFile, AKeyGivenTwiceIsNotToml) {
  const auto loaded = load(with_upstream("[listen]\nport = 1\nport = 2\n"));
  ASSERT_THAT(loaded.mistakes, SizeIs(1));
  EXPECT_THAT(loaded.mistakes[0], StartsWith("proxy.toml:3:"));
  EXPECT_THAT(loaded.mistakes[0], HasSubstr("not valid TOML"));
}

TEST(ProxyConfigFile, AnUnknownTableIsNamedWithTheClosestOne) {
  const auto loaded = load(with_upstream("[listn]\nport = 1\n"));
  ASSERT_THAT(loaded.mistakes, SizeIs(1));
  EXPECT_THAT(loaded.mistakes[0], StartsWith("proxy.toml:1:"));
  EXPECT_THAT(loaded.mistakes[0],
              HasSubstr(": listn: unknown table (did you mean \"listen\"? the top level has "
                        "threads, drain_timeout_ms, route, listen, upstream,"));
}

TEST(ProxyConfigFile, AnUnknownFieldIsNamedWithTheClosestOne) {
  const auto loaded = load(with_upstream("[listen]\nadress = \"0.0.0.0\"\n"));
  EXPECT_THAT(loaded.mistakes,
              ElementsAre("proxy.toml:2:1: listen.adress: unknown field (did you mean "
                          "\"address\"? [listen] has address, port, tls_certificate, "
                          "tls_private_key, tls_client_ca)"));
}

TEST(ProxyConfigFile, ADurationWithoutItsUnitIsUnknown) {
  const auto loaded = load(with_upstream("[duplicates]\nwait = 2000\n"));
  EXPECT_THAT(loaded.mistakes, ElementsAre(StartsWith("proxy.toml:2:1: duplicates.wait: unknown "
                                                      "field (did you mean \"wait_ms\"?")));
}

TEST(ProxyConfigFile, AFieldAboveItsTableSaysWhichTablesHaveIt) {
  const auto loaded = load("port = 8081\n");
  EXPECT_THAT(loaded.mistakes,
              ElementsAre("proxy.toml:1:1: port: unknown field at the top level (it belongs "
                          "under [listen] or [upstream] or [admin])"));
}

TEST(ProxyConfigFile, AQuotedDottedKeyIsNotATableAndItsField) {
  const auto loaded = load(with_upstream("\"listen.port\" = 1\n"));
  ASSERT_THAT(loaded.mistakes, SizeIs(1));
  EXPECT_THAT(loaded.mistakes[0], HasSubstr("listen.port: unknown field"));
}

TEST(ProxyConfigFile, AWrongTypeSaysWhatIsWanted) {
  EXPECT_THAT(load("[upstream]\nport = \"8081\"\n").mistakes,
              ElementsAre("proxy.toml:2:8: upstream.port: a string, where an integer is wanted "
                          "(1 to 65535)"));
  EXPECT_THAT(load(with_upstream("[duplicates]\nwait_ms = 2.5\n")).mistakes,
              ElementsAre("proxy.toml:2:11: duplicates.wait_ms: a float, where an integer is "
                          "wanted (milliseconds, 0 to 86400000)"));
  EXPECT_THAT(load(with_upstream("[fingerprint]\nheaders = \"Content-Type\"\n")).mistakes,
              ElementsAre(HasSubstr("fingerprint.headers: a string, where an array of strings "
                                    "is wanted")));
  EXPECT_THAT(load(with_upstream("listen = 8080\n")).mistakes,
              ElementsAre(HasSubstr("listen: an integer, where a table is wanted")));
  EXPECT_THAT(load(with_upstream("[route]\npath = \"/payments\"\n")).mistakes,
              ElementsAre(HasSubstr("route: a table, where an array of tables is wanted")));
}

TEST(ProxyConfigFile, AValueOutOfRangeSaysTheRange) {
  EXPECT_THAT(load("[upstream]\nport = 70000\n").mistakes,
              ElementsAre("proxy.toml:2:8: upstream.port: 70000 is out of range (1 to 65535)"));
  EXPECT_THAT(load(with_upstream("[listen]\nport = -1\n")).mistakes,
              ElementsAre("proxy.toml:2:8: listen.port: -1 is out of range (0 to 65535)"));
  EXPECT_THAT(load(with_upstream("threads = 0\n")).mistakes,
              ElementsAre(HasSubstr("threads: 0 is out of range (1 to 256)")));
  EXPECT_THAT(load(with_upstream("[limits]\nbody_bytes = 0\n")).mistakes,
              ElementsAre(HasSubstr("limits.body_bytes: 0 is out of range (1 to 1073741824)")));
  EXPECT_THAT(load(with_upstream("[failures]\nunrecorded_status = 200\n")).mistakes,
              ElementsAre(HasSubstr("failures.unrecorded_status: 200 is out of range (400 to "
                                    "599)")));
  EXPECT_THAT(load(with_upstream("[store]\nretention_s = 0\n")).mistakes,
              ElementsAre(HasSubstr("store.retention_s: 0 is out of range (seconds, 1 to ")));
  EXPECT_THAT(load(with_upstream("[store]\ncache_entries = -1\n")).mistakes,
              ElementsAre(HasSubstr("store.cache_entries: -1 is out of range (0 to 10000000)")));
  EXPECT_THAT(load(with_upstream("[store]\ncache_ttl_s = 0\n")).mistakes,
              ElementsAre(HasSubstr("store.cache_ttl_s: 0 is out of range (seconds, 1 to 86400)")));
  EXPECT_THAT(load(with_upstream("[admin]\nport = -2\n")).mistakes,
              ElementsAre(HasSubstr("admin.port: -2 is out of range (-1 to 65535)")));
  EXPECT_THAT(load(with_upstream("[duplicates]\nwait_ms = 9223372036854775807\n")).mistakes,
              ElementsAre(HasSubstr("duplicates.wait_ms: 9223372036854775807 is out of range")));
}

TEST(ProxyConfigFile, AChoiceNotAmongTheChoicesListsThem) {
  EXPECT_THAT(load(with_upstream("[principal]\nfrom = \"cert\"\n")).mistakes,
              ElementsAre("proxy.toml:2:8: principal.from: \"cert\" is not one of the choices "
                          "(\"none\", \"header\" or \"client-certificate\")"));
  EXPECT_THAT(load(with_upstream("[failures]\non_5xx = \"remember\"\n")).mistakes,
              ElementsAre(HasSubstr("failures.on_5xx: \"remember\" is not one of the choices "
                                    "(\"release\" or \"record\")")));
}

TEST(ProxyConfigFile, ARouteWithABadPathOrMethodIsNamedByItsIndex) {
  const auto loaded = load(with_upstream(R"([[route]]
path = "/payments"
[[route]]
method = "post"
path = "orders"
)"));
  EXPECT_THAT(loaded.mistakes,
              ElementsAre(StartsWith("proxy.toml:4:10: route[1].method: \"post\" is not valid "
                                     "(an HTTP method in capitals"),
                          StartsWith("proxy.toml:5:8: route[1].path: \"orders\" is not valid (a "
                                     "path from \"/\" without query")));
  EXPECT_THAT(loaded.config.routes, IsEmpty()) << "no route of a list with a mistake is kept";
}

TEST(ProxyConfigFile, RoutePathsTakeAStarOnlyAsTheirLastSegment) {
  for (const char* bad : {"/orders*", "/a/*/b", "/pay?x=1", "/pay#x", "/pay ments", "*", ""}) {
    const auto loaded = load(with_upstream("[[route]]\npath = \"" + std::string(bad) + "\"\n"));
    EXPECT_THAT(loaded.mistakes, ElementsAre(HasSubstr("route[0].path:"))) << bad;
  }
  for (const char* good : {"/", "/*", "/payments", "/orders/*", "/v1/orders/*", "/a%20b"}) {
    const auto loaded = load(with_upstream("[[route]]\npath = \"" + std::string(good) + "\"\n"));
    EXPECT_THAT(loaded.mistakes, IsEmpty()) << good;
  }
}

TEST(ProxyConfigFile, ARouteWithoutAPathOrWithAnUnknownFieldIsAMistake) {
  EXPECT_THAT(load(with_upstream("[[route]]\nmethod = \"PUT\"\n")).mistakes,
              ElementsAre(HasSubstr("route[0].path: missing")));
  EXPECT_THAT(
      load(with_upstream("[[route]]\npath = \"/p\"\nkeys = \"required\"\n")).mistakes,
      ElementsAre("proxy.toml:3:1: route[0].keys: unknown field (did you mean \"key\"? a route "
                  "has method, path, key)"));
  EXPECT_THAT(load(with_upstream("[[route]]\npath = \"/p\"\nkey = \"optional\"\n")).mistakes,
              ElementsAre(HasSubstr("route[0].key: \"optional\" is not one of the choices "
                                    "(\"required\" or \"honoured\")")));
}

TEST(ProxyConfigFile, TheSameRouteTwiceIsAMistake) {
  EXPECT_THAT(load(with_upstream("[[route]]\npath = \"/p\"\n[[route]]\npath = \"/p\"\n")).mistakes,
              ElementsAre(HasSubstr("route[1]: the same method and path as route[0]")));
  EXPECT_THAT(load(with_upstream("[[route]]\npath = \"/p\"\n[[route]]\nmethod = \"PUT\"\npath = "
                                 "\"/p\"\n"))
                  .mistakes,
              IsEmpty());
}

TEST(ProxyConfigFile, HeaderNamesMustBeTokens) {
  EXPECT_THAT(
      load(with_upstream("[fingerprint]\nheaders = [\"Content-Type\", \"X Kind\"]\n")).mistakes,
      ElementsAre(HasSubstr("fingerprint.headers[1]: \"X Kind\" is not valid (header "
                            "names")));
  EXPECT_THAT(load(with_upstream("[principal]\nheader = \"\"\n")).mistakes,
              ElementsAre(HasSubstr("principal.header: \"\" is not valid")));
  EXPECT_THAT(load(with_upstream("[fingerprint]\nheaders = []\n")).mistakes, IsEmpty());
}

TEST(ProxyConfigFile, TlsNeedsBothTheCertificateAndTheKey) {
  EXPECT_THAT(load(with_upstream("[listen]\ntls_certificate = \"/c.pem\"\n")).mistakes,
              ElementsAre("proxy.toml:2:19: listen.tls_private_key: missing: "
                          "listen.tls_certificate is set (TLS needs both the certificate and its "
                          "key, or neither)"));
  EXPECT_THAT(load(with_upstream("[listen]\ntls_private_key = \"/k.pem\"\n")).mistakes,
              ElementsAre(HasSubstr("listen.tls_certificate: missing: listen.tls_private_key is "
                                    "set")));
  EXPECT_THAT(load(with_upstream("[listen]\ntls_certificate = \"/c.pem\"\ntls_private_key = "
                                 "\"/k.pem\"\n"))
                  .mistakes,
              IsEmpty());
}

TEST(ProxyConfigFile, AClientCaNeedsTls) {
  EXPECT_THAT(load(with_upstream("[listen]\ntls_client_ca = \"/ca.pem\"\n")).mistakes,
              ElementsAre(StartsWith("proxy.toml:2:17: listen.tls_client_ca: set without TLS")));
}

TEST(ProxyConfigFile, AClientCertificatePrincipalNeedsAClientCa) {
  const std::string tls = "[listen]\ntls_certificate = \"/c.pem\"\ntls_private_key = \"/k.pem\"\n";
  EXPECT_THAT(load(with_upstream(tls + "[principal]\nfrom = \"client-certificate\"\n")).mistakes,
              ElementsAre(StartsWith("proxy.toml:5:8: principal.from: \"client-certificate\" "
                                     "without listen.tls_client_ca")));
  EXPECT_THAT(load(with_upstream(tls + "tls_client_ca = \"/ca.pem\"\n[principal]\nfrom = "
                                       "\"client-certificate\"\n"))
                  .mistakes,
              IsEmpty());
}

TEST(ProxyConfigFile, TheAdminListenerIsNotTheClientOne) {
  EXPECT_THAT(load(with_upstream("[admin]\nport = 8080\n")).mistakes,
              ElementsAre(StartsWith("proxy.toml:2:8: admin.port: 8080 is listen.port too")));
  EXPECT_THAT(
      load(with_upstream("[listen]\naddress = \"0.0.0.0\"\n[admin]\nport = 8080\n")).mistakes,
      SizeIs(1));
  EXPECT_THAT(
      load(with_upstream("[listen]\naddress = \"10.0.0.1\"\n[admin]\nport = 8080\n")).mistakes,
      IsEmpty());
  EXPECT_THAT(load(with_upstream("[admin]\nport = 0\n[listen]\nport = 0\n")).mistakes, IsEmpty());
}

TEST(ProxyConfigFile, TheUpstreamIsNotTheProxyItself) {
  EXPECT_THAT(load("[upstream]\nport = 8080\n").mistakes,
              ElementsAre("proxy.toml:2:8: upstream.port: 8080 is listen.port too: the proxy "
                          "would forward to itself (the service's own port)"));
  EXPECT_THAT(load("[upstream]\nport = 8080\nhost = \"10.0.0.2\"\n").mistakes, IsEmpty());
}

TEST(ProxyConfigFile, TheLeaseOutlastsAForward) {
  EXPECT_THAT(load(with_upstream("[store]\nlease_ms = 32000\n")).mistakes,
              ElementsAre("proxy.toml:2:12: store.lease_ms: 32000 is not longer than a forward "
                          "may take (upstream.connect_timeout_ms + upstream.response_timeout_ms = "
                          "32000): another proxy could take the key over and forward the request "
                          "again (more than 32000)"));
  EXPECT_THAT(load(with_upstream("[store]\nlease_ms = 32001\n")).mistakes, IsEmpty());
  // Raised by the response timeout: the line points at it.
  EXPECT_THAT(load("[upstream]\nport = 8081\nresponse_timeout_ms = 90000\n").mistakes,
              ElementsAre(StartsWith("proxy.toml:3:23: store.lease_ms: 60000 is not longer")));
}

TEST(ProxyConfigFile, AStoreUriIsCheckedButNeverRepeated) {
  const auto loaded =
      load(with_upstream("[store]\nuri = \"mysql://user:hunter2@db.example:3306/x\"\n"));
  ASSERT_THAT(loaded.mistakes, SizeIs(1));
  EXPECT_EQ(loaded.mistakes[0],
            "proxy.toml:2:7: store.uri: the scheme \"mysql:\" is not a store idem-proxy opens "
            "(sqlite:PATH, redis://..., rediss://..., redis+cluster://..., rediss+cluster://... "
            "or postgresql://...)");
  EXPECT_THAT(load(with_upstream("[store]\nuri = \"sqlite:\"\n")).mistakes,
              ElementsAre(HasSubstr("store.uri: the URI names no file")));
  EXPECT_THAT(load(with_upstream("[store]\nuri = \"redis://\"\n")).mistakes,
              ElementsAre(HasSubstr("store.uri: the URI names no server")));
  EXPECT_THAT(load(with_upstream("[store]\nuri = \"/var/lib/x.db\"\n")).mistakes,
              ElementsAre(HasSubstr("store.uri: not a URI")));
  for (const char* good : {"sqlite:///var/lib/x.db", "sqlite:records.db", "redis://127.0.0.1:6379",
                           "rediss://h:6380?ca_file=/ca.pem", "redis+cluster://a:7000,b:7000",
                           "postgresql://u@db/idem", "postgres:///idem?host=/run/postgresql"}) {
    const auto ok = load(with_upstream("[store]\nuri = \"" + std::string(good) + "\"\n"));
    EXPECT_THAT(ok.mistakes, IsEmpty()) << good;
    EXPECT_EQ(ok.config.store.uri, good);
  }
}

TEST(ProxyConfigFile, EveryMistakeIsSaidInTheFilesOrder) {
  const auto loaded = load(R"(threads = 0
[upstream]
port = 0
host = ""
[limits]
body_bytes = -5
)");
  EXPECT_THAT(loaded.mistakes, ElementsAre(StartsWith("proxy.toml:1:11: threads:"),
                                           StartsWith("proxy.toml:3:8: upstream.port:"),
                                           StartsWith("proxy.toml:4:8: upstream.host:"),
                                           StartsWith("proxy.toml:6:14: limits.body_bytes:")));
}

TEST(ProxyConfigFile, AMessageCarriesNoControlBytes) {
  const auto loaded = load(with_upstream("[[route]]\npath = \"/p\"\nmethod = \"P\\u001b[2J\"\n"));
  ASSERT_THAT(loaded.mistakes, SizeIs(1));
  EXPECT_THAT(loaded.mistakes[0], HasSubstr("\"P\\x1B[2J\" is not valid"));
  EXPECT_THAT(loaded.mistakes[0], Not(HasSubstr("\x1b")));
}

TEST(ProxyConfigFile, AFileThatCannotBeReadIsSaid) {
  ConfigBuilder builder;
  builder.read_file("/nonexistent/idem-proxy.toml");
  EXPECT_THAT(builder.mistakes(),
              ElementsAre("/nonexistent/idem-proxy.toml: cannot be read: No such file or "
                          "directory"));
  ConfigBuilder folder;
  folder.read_file(::testing::TempDir());
  EXPECT_THAT(folder.mistakes(), ElementsAre(HasSubstr(": is a directory (a TOML config file)")));
}

TEST(ProxyConfigFile, LoadConfigFileIsConfigInvalidWithEveryLine) {
  const std::string path =
      testing::write_temp_file("load_config_file.toml", "threads = 0\n[listen]\nport = -1\n");
  const Result<ProxyConfig> loaded = load_config_file(path);
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.error(), make_error_code(errc::config_invalid));
  EXPECT_EQ(loaded.failure().message, path + ":1:11: threads: 0 is out of range (1 to 256)\n" +
                                          path +
                                          ":3:8: listen.port: -1 is out of range (0 to 65535)");

  const std::string good =
      testing::write_temp_file("load_config_file_good.toml", "[upstream]\nport = 8081\n");
  const Result<ProxyConfig> read = load_config_file(good);
  ASSERT_TRUE(read) << read.failure().message;
  EXPECT_EQ(describe(read.value()), describe(defaults_with_upstream()));
}

}  // namespace
}  // namespace idem::proxy
