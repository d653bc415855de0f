// idem-proxy: an HTTP/1.1 reverse proxy that enforces the Idempotency-Key protocol in front of
// any upstream (docs/proxy.md, man idem-proxy).
//
//   idem-proxy --config FILE [--listen HOST:PORT] [--upstream HOST:PORT] [--store URI]
//              [--admin HOST:PORT] [--set SECTION.FIELD=VALUE]... [--check-config]
//
// Exit statuses: run_proxy.hpp's ExitCode.

#include <cstdio>
#include <exception>

#include "command_line.hpp"
#include "idem/version.hpp"
#include "run_proxy.hpp"

int main(int argc, char** argv) {
  using idem::proxy::CommandLine;
  // Without argv[0] (an exec with an empty argv has none).
  const CommandLine line = argc > 0 ? idem::proxy::parse_command_line(argc - 1, argv + 1)
                                    : idem::proxy::parse_command_line(0, argv);
  switch (line.action) {
    case CommandLine::Action::help:
      std::fputs(idem::proxy::usage().c_str(), stdout);
      return idem::proxy::kExitOk;
    case CommandLine::Action::version:
      std::printf("idem-proxy %d.%d.%d\n", IDEM_VERSION_MAJOR, IDEM_VERSION_MINOR,
                  IDEM_VERSION_PATCH);
      return idem::proxy::kExitOk;
    case CommandLine::Action::run:
    case CommandLine::Action::check_config:
      break;
  }
  if (!line.error.empty()) {
    std::fprintf(stderr, "%s\nidem-proxy: see idem-proxy --help\n", line.error.c_str());
    return idem::proxy::kExitUsage;
  }
  if (line.action == CommandLine::Action::check_config) {
    std::puts("config OK");
    return idem::proxy::kExitOk;
  }
  try {
    return idem::proxy::run_proxy(line.config, stdout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idem-proxy: %s\n", e.what());
    return idem::proxy::kExitCannotStart;
  }
}
