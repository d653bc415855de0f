// What idem-proxy ships beside its binary: the example config (every field at its default), the
// man page (every option of --help), the systemd unit (a stop timeout above the drain), and the
// documentation of every field.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "command_line.hpp"
#include "config_file.hpp"
#include "config_test_support.hpp"

namespace idem::proxy {
namespace {

using testing::describe;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::read_file;

const std::string kSource = IDEM_PROXY_SOURCE_DIR;
const std::string kExample = kSource + "/share/idem/idem-proxy.toml";

TEST(ProxyPackaging, TheExampleConfigIsTheDefaultsPlusTheUpstreamAndTwoRoutes) {
  ConfigBuilder builder;
  builder.read_file(kExample);
  builder.check();
  ASSERT_THAT(builder.mistakes(), IsEmpty());
  ProxyConfig expected = testing::defaults_with_upstream(8081);
  expected.routes = {{.method = "POST", .path = "/payments", .key = KeyUse::required},
                     {.method = "POST", .path = "/orders/*", .key = KeyUse::honoured}};
  EXPECT_EQ(describe(builder.config()), describe(expected));
}

// Each field is written out, "name = value" under its table, so the file shows every default.
TEST(ProxyPackaging, TheExampleConfigWritesEveryField) {
  const std::string text = read_file(kExample);
  for (const std::string& dotted : config_field_names()) {
    const std::string name = dotted.substr(dotted.find('.') + 1);
    EXPECT_THAT(text, HasSubstr("\n" + name + " = ")) << dotted;
  }
}

// The example through the command line: the same configuration, and overrides on top of it.
TEST(ProxyPackaging, TheExampleConfigThroughTheCommandLine) {
  const std::vector<const char*> argv{"--config", kExample.c_str(), "--check-config"};
  const CommandLine line = parse_command_line(static_cast<int>(argv.size()), argv.data());
  EXPECT_EQ(line.error, "");
  EXPECT_EQ(line.action, CommandLine::Action::check_config);
  ConfigBuilder builder;
  builder.read_file(kExample);
  EXPECT_EQ(describe(line.config), describe(builder.config()));
}

std::set<std::string> options_of_usage() {
  const std::string text = usage();
  const std::regex option(R"((^|[\s\[,])(--?[A-Za-z][A-Za-z-]*))");
  std::set<std::string> options;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), option);
       it != std::sregex_iterator(); ++it) {
    options.insert((*it)[2].str());
  }
  return options;
}

TEST(ProxyPackaging, TheManPageHasEveryOptionOfTheUsage) {
  std::string page = read_file(kSource + "/share/man/man1/idem-proxy.1");
  ASSERT_FALSE(page.empty());
  // troff writes a minus sign as \-.
  page = std::regex_replace(page, std::regex(R"(\\-)"), "-");
  const std::set<std::string> options = options_of_usage();
  EXPECT_GE(options.size(), 11u) << "the usage's options were not found";
  for (const std::string& option : options) {
    EXPECT_THAT(page, HasSubstr(option)) << option << " is in --help but not in the man page";
  }
}

TEST(ProxyPackaging, TheManPageAndTheDocsNameEveryField) {
  std::string page = read_file(kSource + "/share/man/man1/idem-proxy.1");
  page = std::regex_replace(page, std::regex(R"(\\-)"), "-");
  const std::string docs = read_file(kSource + "/docs/proxy.md");
  ASSERT_FALSE(docs.empty());
  for (const std::string& dotted : config_field_names()) {
    const std::string name = dotted.substr(dotted.find('.') + 1);
    EXPECT_THAT(page, HasSubstr(name)) << dotted;
    EXPECT_THAT(docs, HasSubstr("`" + dotted + "`")) << dotted;
  }
}

TEST(ProxyPackaging, TheDocsShowTheHelpAsItIs) {
  const std::string docs = read_file(kSource + "/docs/proxy.md");
  EXPECT_THAT(docs, HasSubstr("```\n" + usage() + "```\n"))
      << "docs/proxy.md's copy of idem-proxy --help differs from usage()";
}

// The unit's settings that idem-proxy's behaviour depends on.
TEST(ProxyPackaging, TheSystemdUnitStopsWithSigtermAfterTheDrain) {
  const std::string unit = read_file(kSource + "/share/idem/idem-proxy.service");
  ASSERT_FALSE(unit.empty());
  EXPECT_THAT(unit, HasSubstr("\nType=simple\n"));
  EXPECT_THAT(unit, HasSubstr("\nKillSignal=SIGTERM\n"));
  std::smatch stop;
  ASSERT_TRUE(std::regex_search(unit, stop, std::regex(R"(\nTimeoutStopSec=(\d+)\n)")));
  ConfigBuilder builder;
  builder.read_file(kExample);
  EXPECT_GT(std::stoll(stop[1].str()) * 1000, builder.config().drain_timeout.count())
      << "systemd would SIGKILL the proxy before its drain ends";
  // The SQLite store's default file is in the unit's state directory.
  EXPECT_THAT(unit, HasSubstr("\nStateDirectory=idem-proxy\n"));
  EXPECT_THAT(ProxyConfig{}.store.uri, HasSubstr("/var/lib/idem-proxy/"));
  EXPECT_THAT(unit, HasSubstr("idem-proxy --config "));
  // A bad config (exit status 2) is not restarted over and over.
  EXPECT_THAT(unit, HasSubstr("\nRestartPreventExitStatus=2\n"));
}

}  // namespace
}  // namespace idem::proxy
