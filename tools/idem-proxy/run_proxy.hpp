#pragma once
// Runs idem-proxy on a configuration: the one call main() makes once the command line is read.

#include <cstdio>

#include "proxy_config.hpp"

namespace idem::proxy {

/// Exit codes of idem-proxy.
enum ExitCode : int {
  kExitOk = 0,           // served, then drained every request in hand
  kExitCannotStart = 1,  // the store, a listener or a TLS file could not be used (said on stderr)
  kExitUsage = 2,        // the command line or the config file is unusable (said on stderr)
  kExitCut = 3,          // the drain's bound passed with requests still in hand
};

/// Opens the store, binds the listeners, prints "listening on http://ADDR:PORT" (https:// with
/// TLS) and then, when the admin listener is on, "admin on http://ADDR:PORT" on `out`, one line
/// each, flushed; serves until SIGTERM or SIGINT; stops accepting, lets the requests in hand
/// finish within drain_timeout, and returns an ExitCode.
int run_proxy(const ProxyConfig& config, std::FILE* out);

}  // namespace idem::proxy
