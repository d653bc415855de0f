// The logging observer: idem::spdlog (header-only, on spdlog) logs a store error through the
// logger it is given.
#include <spdlog/sinks/ostream_sink.h>

#include <cstdio>
#include <idem/spdlog.hpp>
#include <memory>
#include <sstream>
#include <string>

int main() {
  std::ostringstream out;
  auto logger = std::make_shared<spdlog::logger>(
      "idem", std::make_shared<spdlog::sinks::ostream_sink_st>(out));
  idem::spdlog_observer(logger)->notify(
      idem::EventInfo{.event = idem::Event::store_error, .scope = "package", .key = "k"});
  const bool ok = out.str().find("idem store_error: scope=package") != std::string::npos;
  std::printf("idem::spdlog consumer: %s\n", ok ? "ok" : out.str().c_str());
  return ok ? 0 : 1;
}
