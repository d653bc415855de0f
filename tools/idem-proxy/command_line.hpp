#pragma once
// idem-proxy's command line: a config file and overrides of its fields (docs/proxy.md).

#include <string>

#include "proxy_config.hpp"

namespace idem::proxy {

struct CommandLine {
  enum class Action { run, check_config, help, version };
  Action action = Action::run;
  /// The file's configuration with the command line's overrides applied.
  ProxyConfig config;
  /// Non-empty: the command line or the config file cannot be used; one line per mistake, each
  /// naming where it is (file:line:column and the field, or the option).
  std::string error;
};

/// Reads argv (without argv[0]); reads and checks the config file it names.
CommandLine parse_command_line(int argc, const char* const* argv);

/// The --help text.
std::string usage();

}  // namespace idem::proxy
