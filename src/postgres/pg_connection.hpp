#pragma once

#include <chrono>
#include <string>

#include "postgres/pqxx_compat.hpp"

namespace idem::postgres::detail {

/// A libpqxx connection whose non-blocking connect is bounded by `connect_budget` in ms (libpq's
/// own counts whole seconds; zero: no bound); throws pqxx::broken_connection. Never reopened.
class PgConnection final : public ConnectionBase {
 public:
  PgConnection(const std::string& conninfo, std::chrono::milliseconds connect_budget);
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;
};

}  // namespace idem::postgres::detail
