#pragma once
// The PostgreSQL server of the tests: its URI from the environment (scripts/test starts one and
// sets IDEM_TEST_PG_URI), and why a case that needs it is skipped without it.

#include <cstdlib>
#include <optional>
#include <string>

namespace idem::testing {

/// IDEM_TEST_PG_URI, or nullopt when unset or empty.
inline std::optional<std::string> pg_uri() {
  const char* uri = std::getenv("IDEM_TEST_PG_URI");
  if (uri == nullptr || *uri == '\0') return std::nullopt;
  return std::string(uri);
}

inline constexpr const char* kNoPgMessage =
    "IDEM_TEST_PG_URI is not set: PostgreSQL tests need a server (scripts/test starts one)";

}  // namespace idem::testing
