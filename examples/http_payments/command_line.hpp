#pragma once
// http_payments' command line: every option, its default and its bounds. A wrong argument is a
// message naming it (the caller prints it with the usage and exits 2), never an exception.

#include <string>
#include <vector>

#include "payments_config.hpp"
#include "transport/transport_settings.hpp"

namespace payments {

struct CommandLine {
  Config service;
  transport::TransportSettings transport;
  int port = 8080;
  bool help = false;
  std::string error;  // empty when the arguments are good
};

CommandLine parse_command_line(const std::vector<std::string>& args);

extern const char* const kUsage;

}  // namespace payments
