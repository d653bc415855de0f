#include "command_line.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <string_view>
#include <vector>

#include "../idem/secrets.hpp"
#include "config_file.hpp"
#include "config_reader.hpp"

namespace idem::proxy {

namespace {

// One override, applied in the order the command line gives them.
struct Override {
  std::string option;  // "--listen", "--set"...
  std::string value;
};

// The options that take a value.
bool takes_value(std::string_view option) {
  constexpr std::array<std::string_view, 6> kValueOptions{"--config", "--listen", "--upstream",
                                                          "--store",  "--admin",  "--set"};
  return std::find(kValueOptions.begin(), kValueOptions.end(), option) != kValueOptions.end();
}

// A --set's value with its TOML quotes taken off, to look for a password in a store URI.
std::string_view unquoted(std::string_view value) {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
      value.back() == value.front()) {
    value = value.substr(1, value.size() - 2);
  }
  return value;
}

constexpr std::string_view kPasswordAllowed =
    "every user of this machine can read a command's arguments (ps): give the URI with its "
    "password in the config file, readable by the proxy's user only";

void apply(const Override& o, ConfigBuilder& builder) {
  if (o.option == "--listen") {
    builder.set_endpoint(Endpoint::listen, o.value, o.option + ' ' + o.value);
  } else if (o.option == "--upstream") {
    builder.set_endpoint(Endpoint::upstream, o.value, o.option + ' ' + o.value);
  } else if (o.option == "--admin") {
    builder.set_endpoint(Endpoint::admin, o.value, o.option + ' ' + o.value);
  } else if (o.option == "--store") {
    // The URI is not repeated: it may hold a password.
    if (cli::has_password(o.value)) {
      builder.add_mistake(config::mistake_line("--store", "store.uri", "the URI holds a password",
                                               kPasswordAllowed));
      return;
    }
    builder.set_text("store.uri", o.value, "--store");
  } else {  // --set
    const auto equals = o.value.find('=');
    const std::string_view field = std::string_view(o.value).substr(0, equals);
    if (field.find("store.uri") != std::string_view::npos) {
      if (equals != std::string::npos &&
          cli::has_password(unquoted(std::string_view(o.value).substr(equals + 1)))) {
        builder.add_mistake(config::mistake_line("--set store.uri=...", "store.uri",
                                                 "the URI holds a password", kPasswordAllowed));
        return;
      }
      builder.set(o.value, "--set store.uri=...");
      return;
    }
    builder.set(o.value, "--set " + o.value);
  }
}

}  // namespace

CommandLine parse_command_line(int argc, const char* const* argv) {
  CommandLine line;
  std::vector<std::string> mistakes;
  std::optional<std::string> config_path;
  std::vector<Override> overrides;
  bool help = false;
  bool version = false;
  for (int i = 0; i < argc; ++i) {
    const std::string_view arg = argv[i];
    std::string_view option = arg;
    std::optional<std::string_view> value;
    if (arg.starts_with("--")) {
      if (const auto equals = arg.find('='); equals != std::string_view::npos) {
        option = arg.substr(0, equals);
        value = arg.substr(equals + 1);
      }
    }
    if (option == "--help" || option == "-h") {
      help = true;
    } else if (option == "--version" || option == "-V") {
      version = true;
    } else if (option == "--check-config") {
      line.action = CommandLine::Action::check_config;
    } else if (takes_value(option)) {
      if (!value) {
        if (i + 1 == argc) {
          mistakes.push_back(config::mistake_line(option, "", "needs a value", "see --help"));
          continue;
        }
        value = argv[++i];
      }
      if (option == "--config") {
        if (config_path) {
          mistakes.push_back(config::mistake_line(option, "", "given twice", "one config file"));
        }
        config_path = std::string(*value);
      } else {
        overrides.push_back({std::string(option), std::string(*value)});
      }
    } else if (arg.starts_with('-')) {
      mistakes.push_back(
          config::mistake_line(config::quoted_text(arg), "", "unknown option", "see --help"));
    } else {
      mistakes.push_back(config::mistake_line(config::quoted_text(arg), "", "unexpected argument",
                                              "the config file comes with --config FILE"));
    }
  }
  if (help || version) {
    line.action = help ? CommandLine::Action::help : CommandLine::Action::version;
    return line;
  }

  // The arguments' own mistakes first, then the file's and the overrides', in their order.
  ConfigBuilder builder;
  if (config_path) builder.read_file(*config_path);
  for (const Override& o : overrides) apply(o, builder);
  if (mistakes.empty()) builder.check();
  mistakes.insert(mistakes.end(), builder.mistakes().begin(), builder.mistakes().end());
  line.config = builder.config();
  for (const std::string& mistake : mistakes) {
    if (!line.error.empty()) line.error += '\n';
    line.error += mistake;
  }
  return line;
}

std::string usage() {
  return R"(Usage: idem-proxy [--config FILE] [options]

An HTTP/1.1 reverse proxy that makes the routes it guards idempotent: a request with an
Idempotency-Key is forwarded to the upstream once, and every repeat of it is answered with the
answer recorded in the store (Idempotent-Replayed: true). man idem-proxy and docs/proxy.md
describe it and every field of the config file.

Options:
  --config FILE          the TOML config file (share/idem/idem-proxy.toml is an example, every
                         field with its default); without it, the defaults
  --listen HOST:PORT     where clients connect (listen.address, listen.port; port 0: a free
                         one, named on the first line of the output)
  --upstream HOST:PORT   the service behind the proxy (upstream.host, upstream.port; required)
  --store URI            the record store (store.uri): sqlite:PATH, redis://...,
                         redis+cluster://..., postgresql://...; a URI with a password is
                         refused here (every user can read the arguments): use the file
  --admin HOST:PORT      the listener of /metrics and /health (admin.address, admin.port)
  --set SECTION.FIELD=VALUE
                         any field of the config file, VALUE in TOML syntax; repeatable:
                           --set duplicates.wait_ms=2000
                           --set 'fingerprint.headers=["Content-Type", "Authorization"]'
                           --set 'store.uri="redis://127.0.0.1:6379"'
  --check-config         read the file and the options, print "config OK" and exit 0, or
                         print each mistake (FILE:LINE:COLUMN: field: what is wrong) and exit 2
  -h, --help             print this text
  -V, --version          print idem-proxy's version

The options are applied after the file, in the order given: a later one wins.

On SIGTERM or SIGINT idem-proxy stops accepting, lets the requests in hand finish (each key
recorded or released, never left held) within drain_timeout_ms, and exits.

Exit status: 0 served, then drained; 1 could not start (the store, a listener or a TLS file);
2 the command line or the config file is unusable; 3 drain_timeout_ms passed with requests
still in hand.
)";
}

}  // namespace idem::proxy
