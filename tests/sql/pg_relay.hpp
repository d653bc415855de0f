#pragma once
// A FaultRelay in front of the PostgreSQL test server, and a connection string through it.

#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <string>

#include "support/fault_relay.hpp"

namespace idem::testing {

struct PgRelay {
  std::unique_ptr<FaultRelay> relay;
  std::string uri;  // key=value connection string through the relay
};

/// A relay to the server `uri` names, as the server says where it is (the relay passes the same
/// user and database on); nullopt when the server is not on IPv4.
inline std::optional<PgRelay> pg_relay(const std::string& uri) {
  pqxx::connection probe(uri);
  const pqxx::result found = pqxx::nontransaction(probe).exec(
      "SELECT host(inet_server_addr()), inet_server_port(), current_user, current_database()");
  const auto where = found.at(0);
  if (where[0].is_null() || where[0].as<std::string>().find(':') != std::string::npos) {
    return std::nullopt;
  }
  auto relay = std::make_unique<FaultRelay>(where[0].as<std::string>(), where[1].as<int>());
  auto quoted = [](const std::string& v) {  // a connection-string value
    std::string out = "'";
    for (char c : v) out += c == '\\' || c == '\'' ? std::string{'\\', c} : std::string(1, c);
    return out + "'";
  };
  std::string through =
      "host=127.0.0.1 port=" + std::to_string(relay->port()) +
      " sslmode=disable gssencmode=disable user=" + quoted(where[2].as<std::string>()) +
      " dbname=" + quoted(where[3].as<std::string>());
  return PgRelay{std::move(relay), std::move(through)};
}

}  // namespace idem::testing
