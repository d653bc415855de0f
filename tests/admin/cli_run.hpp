#pragma once
// Runs the idem command (IDEM_CLI_PATH) for the admin tests: its exit status and output.

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace idem::testing {

struct CliRun {
  int status = -1;
  std::string out;
  std::string err;
};

inline std::string q(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Runs the idem command with `args` (already quoted where needed).
inline CliRun idem_cli(const std::string& args) {
  static int n = 0;
  const std::string err =
      "/tmp/idem_admin_test_err_" + std::to_string(getpid()) + "_" + std::to_string(n++);
  const std::string cmd = std::string(IDEM_CLI_PATH) + " " + args + " 2>" + err;
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  std::size_t got = 0;
  while ((got = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, got);
  const int w = pclose(p);
  r.status = WIFEXITED(w) ? WEXITSTATUS(w) : -1;
  r.err = slurp(err);
  std::filesystem::remove(err);
  return r;
}

}  // namespace idem::testing
