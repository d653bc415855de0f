#pragma once
// A checker of the Prometheus text exposition format (version 0.0.4): comment lines (# HELP,
// # TYPE with a known type), and samples `name{label="value",...} number [timestamp]`.

#include <regex>
#include <sstream>
#include <string>

namespace idem::test {

inline bool valid_prometheus_text(const std::string& text, std::string& why) {
  static const std::regex help(R"(^# HELP [a-zA-Z_:][a-zA-Z0-9_:]* .*$)");
  static const std::regex type(
      R"(^# TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (counter|gauge|histogram|summary|untyped)$)");
  static const std::regex sample(
      R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*")(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*")*,?\})? ([-+]?[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?|[-+]?Inf|NaN)( -?[0-9]+)?$)");
  std::istringstream in(text);
  std::string line;
  int samples = 0;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    const bool ok = line.rfind("# HELP ", 0) == 0   ? std::regex_match(line, help)
                    : line.rfind("# TYPE ", 0) == 0 ? std::regex_match(line, type)
                    : line[0] == '#'                ? true
                                                    : (++samples, std::regex_match(line, sample));
    if (!ok) {
      why = "line " + std::to_string(n) + " is not the text format: " + line;
      return false;
    }
  }
  if (samples == 0) {
    why = "no samples";
    return false;
  }
  return true;
}

}  // namespace idem::test
