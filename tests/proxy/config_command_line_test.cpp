// idem-proxy's command line: the config file, then the overrides in their order (a later one
// wins), each mistake one line naming the option; --help and --version win over the rest.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "command_line.hpp"
#include "config_test_support.hpp"

namespace idem::proxy {
namespace {

using testing::defaults_with_upstream;
using testing::describe;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

CommandLine parse(std::initializer_list<const char*> args) {
  const std::vector<const char*> argv(args);
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

TEST(ProxyCommandLine, WithoutAFileTheDefaultsNeedAnUpstream) {
  const CommandLine line = parse({});
  EXPECT_EQ(line.action, CommandLine::Action::run);
  EXPECT_EQ(line.error,
            "idem-proxy: upstream.port: missing: the upstream's port is required ([upstream] "
            "port = 1 to 65535, or --upstream HOST:PORT)");

  const CommandLine enough = parse({"--upstream", "127.0.0.1:8081"});
  EXPECT_EQ(enough.error, "");
  EXPECT_EQ(describe(enough.config), describe(defaults_with_upstream()));
}

TEST(ProxyCommandLine, OptionsWinOverTheFileAndALaterOptionOverAnEarlierOne) {
  const std::string path = testing::write_temp_file("overrides.toml", R"(
[listen]
address = "127.0.0.1"
port = 9000
[upstream]
host = "10.0.0.2"
port = 8081
[store]
uri = "sqlite:///tmp/file.db"
[duplicates]
wait_ms = 100
)");
  const CommandLine line = parse(
      {"--config", path.c_str(), "--listen", "0.0.0.0:9100", "--upstream=[::1]:9200", "--store",
       "redis://127.0.0.1:6379", "--admin", "127.0.0.1:0", "--set", "duplicates.wait_ms=2000",
       "--set", "listen.port=9300", "--set", "fingerprint.headers=[\"Content-Type\", \"X-Kind\"]"});
  ASSERT_EQ(line.error, "");
  ProxyConfig expected = defaults_with_upstream(9200);
  expected.listen.address = "0.0.0.0";
  expected.listen.port = 9300;  // --set after --listen
  expected.upstream.host = "::1";
  expected.store.uri = "redis://127.0.0.1:6379";
  expected.admin.port = 0;
  expected.duplicates.wait = std::chrono::milliseconds(2000);
  expected.fingerprint.headers = {"Content-Type", "X-Kind"};
  EXPECT_EQ(describe(line.config), describe(expected));
}

TEST(ProxyCommandLine, SetTakesRoutesAndTopLevelFields) {
  const CommandLine line =
      parse({"--upstream", "127.0.0.1:8081", "--set", "threads=8", "--set",
             R"(route=[{path="/payments"}, {method="*", path="/orders/*", key="honoured"}])"});
  ASSERT_EQ(line.error, "");
  EXPECT_EQ(line.config.threads, 8u);
  ASSERT_EQ(line.config.routes.size(), 2u);
  EXPECT_EQ(line.config.routes[0].method, "POST");
  EXPECT_EQ(line.config.routes[0].path, "/payments");
  EXPECT_EQ(line.config.routes[1].method, "*");
  EXPECT_EQ(line.config.routes[1].key, KeyUse::honoured);
}

TEST(ProxyCommandLine, ASetWithABadValueNamesTheOptionAndTheField) {
  EXPECT_THAT(parse({"--upstream", "h:1", "--set", "duplicates.wait_ms=soon"}).error,
              HasSubstr("--set duplicates.wait_ms=soon: duplicates.wait_ms: the value is not "
                        "TOML: "));
  EXPECT_EQ(parse({"--upstream", "h:1", "--set", "duplicates.wait_ms=\"2000\""}).error,
            "--set duplicates.wait_ms=\"2000\": duplicates.wait_ms: a string, where an integer "
            "is wanted (milliseconds, 0 to 86400000)");
  EXPECT_EQ(parse({"--upstream", "h:1", "--set", "duplicates.wait_ms=-1"}).error,
            "--set duplicates.wait_ms=-1: duplicates.wait_ms: -1 is out of range (milliseconds, 0 "
            "to 86400000)");
  EXPECT_THAT(parse({"--upstream", "h:1", "--set", "principal.from=header"}).error,
              HasSubstr("--set principal.from=header: principal.from: the value is not TOML"))
      << "a string needs its quotes";
  EXPECT_THAT(parse({"--upstream", "h:1", "--set", "duplicates.wait_ms=1\nthreads = 3"}).error,
              HasSubstr("duplicates.wait_ms: more than one value"));
  EXPECT_THAT(parse({"--upstream", "h:1", "--set", "upstream.prot=1"}).error,
              HasSubstr("--set upstream.prot=1: upstream.prot: unknown field (did you mean "
                        "\"port\"?"));
  EXPECT_THAT(parse({"--upstream", "h:1", "--set", "upstraem.port=1"}).error,
              HasSubstr("--set upstraem.port=1: upstraem: unknown table (did you mean "
                        "\"upstream\"?"));
  EXPECT_EQ(parse({"--upstream", "h:1", "--set", "upstream.port"}).error,
            "--set upstream.port: not SECTION.FIELD=VALUE (e.g. duplicates.wait_ms=2000)");
}

TEST(ProxyCommandLine, HostAndPortOptions) {
  EXPECT_EQ(parse({"--upstream", "localhost"}).error,
            "--upstream localhost: not HOST:PORT (e.g. 127.0.0.1:8080 or [::1]:8080)");
  EXPECT_THAT(parse({"--upstream", "::1:8081"}).error, HasSubstr("not HOST:PORT"))
      << "an IPv6 address needs its brackets";
  EXPECT_THAT(parse({"--upstream", "h:"}).error, HasSubstr("not HOST:PORT"));
  EXPECT_THAT(parse({"--upstream", ":8081"}).error, HasSubstr("not HOST:PORT"));
  EXPECT_THAT(parse({"--upstream", "h:80x"}).error, HasSubstr("not HOST:PORT"));
  EXPECT_EQ(parse({"--upstream", "h:99999"}).error,
            "--upstream h:99999: upstream.port: 99999 is out of range (1 to 65535)");
  EXPECT_EQ(parse({"--upstream", "h:1", "--listen", "bad host:80"}).error,
            "--listen bad host:80: listen.address: \"bad host\" is not valid (a host name or IP "
            "address, e.g. \"127.0.0.1\" or \"::1\")");
  const CommandLine v6 = parse({"--upstream", "h:1", "--listen", "[::]:0"});
  EXPECT_EQ(v6.error, "");
  EXPECT_EQ(v6.config.listen.address, "::");
  EXPECT_EQ(v6.config.listen.port, 0);
}

TEST(ProxyCommandLine, AStoreUriWithAPasswordIsRefusedAndNotRepeated) {
  const CommandLine line = parse({"--upstream", "h:1", "--store", "redis://:hunter2@h:6379"});
  EXPECT_THAT(line.error, HasSubstr("--store: store.uri: the URI holds a password"));
  EXPECT_THAT(line.error, Not(HasSubstr("hunter2")));
  const CommandLine set =
      parse({"--upstream", "h:1", "--set", "store.uri=\"postgresql://u:hunter2@db/x\""});
  EXPECT_THAT(set.error, HasSubstr("--set store.uri=...: store.uri: the URI holds a password"));
  EXPECT_THAT(set.error, Not(HasSubstr("hunter2")));
  const CommandLine bad = parse({"--upstream", "h:1", "--set", "store.uri=mysql://u:hunter2@x"});
  EXPECT_THAT(bad.error, HasSubstr("--set store.uri=...: store.uri:"));
  EXPECT_THAT(bad.error, Not(HasSubstr("hunter2")));
  const CommandLine plain = parse({"--upstream", "h:1", "--store", "redis://h:6379"});
  EXPECT_EQ(plain.error, "");
  EXPECT_EQ(plain.config.store.uri, "redis://h:6379");
}

TEST(ProxyCommandLine, UnknownOptionsAndArgumentsAreMistakes) {
  EXPECT_EQ(parse({"--upstream", "h:1", "--listn", "h:2"}).error,
            "\"--listn\": unknown option (see --help)\n\"h:2\": unexpected argument (the config "
            "file comes with --config FILE)");
  EXPECT_EQ(parse({"--upstream"}).error, "--upstream: needs a value (see --help)");
  const CommandLine twice =
      parse({"--config", "a.toml", "--config", "b.toml", "--upstream", "h:1"});
  EXPECT_THAT(twice.error, HasSubstr("--config: given twice (one config file)"));
  EXPECT_THAT(twice.error, HasSubstr("b.toml: cannot be read"));
}

TEST(ProxyCommandLine, ConfigMistakesComeWithTheirFile) {
  const std::string path = testing::write_temp_file(
      "broken.toml", "[upstream]\nport = 8081\n[limits]\nbody_bytes = 0\n");
  const CommandLine line = parse({"--config", path.c_str(), "--check-config"});
  EXPECT_EQ(line.action, CommandLine::Action::check_config);
  EXPECT_EQ(line.error, path + ":4:14: limits.body_bytes: 0 is out of range (1 to 1073741824)");
}

TEST(ProxyCommandLine, MistakesComeInTheOrderOfTheirSources) {
  const std::string path = testing::write_temp_file("ordered.toml", "threads = 0\n");
  const CommandLine line = parse({"--config", path.c_str(), "--store", "redis://:pw@h:6379",
                                  "--upstream", "h:0", "--set", "threads=1"});
  EXPECT_EQ(line.error,
            path +
                ":1:11: threads: 0 is out of range (1 to 256)\n--store: store.uri: the URI "
                "holds a password (every user of this machine can read a command's arguments "
                "(ps): give the URI with its password in the config file, readable by the "
                "proxy's user only)\n--upstream h:0: upstream.port: 0 is out of range (1 to "
                "65535)");
}

TEST(ProxyCommandLine, HelpAndVersionWinOverEverythingElse) {
  EXPECT_EQ(parse({"--bogus", "--help"}).action, CommandLine::Action::help);
  EXPECT_EQ(parse({"--bogus", "--help"}).error, "");
  EXPECT_EQ(parse({"-h"}).action, CommandLine::Action::help);
  EXPECT_EQ(parse({"--config", "/nonexistent.toml", "--version"}).action,
            CommandLine::Action::version);
  EXPECT_EQ(parse({"-V"}).action, CommandLine::Action::version);
}

TEST(ProxyCommandLine, CheckConfigIsAnAction) {
  const CommandLine line = parse({"--check-config", "--upstream", "h:1"});
  EXPECT_EQ(line.action, CommandLine::Action::check_config);
  EXPECT_EQ(line.error, "");
}

TEST(ProxyCommandLine, TheUsageNamesEveryOption) {
  const std::string text = usage();
  for (const char* option : {"--config", "--listen", "--upstream", "--store", "--admin", "--set",
                             "--check-config", "--help", "--version"}) {
    EXPECT_THAT(text, HasSubstr(option));
  }
}

}  // namespace
}  // namespace idem::proxy
