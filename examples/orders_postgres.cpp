// The orders service of orders_sqlite.cpp on PostgreSQL, transactional mode: the business insert
// and the idempotency record commit in one transaction.
//
//   build/examples/example_orders_postgres postgresql://user@host:5432/db
//
// Without a URI it says so and exits 0 (the main CI job runs every example without a server).

#include <fmt/format.h>

#include <cstdio>
#include <pqxx/pqxx>
#include <stdexcept>
#include <string>

#include "idem/idem.hpp"
#include "idem/postgres/store.hpp"
#include "idem/postgres/transaction.hpp"

namespace {

struct Order {
  std::string customer;
  std::string item;
  int quantity = 0;
};

int failures = 0;
void check(bool ok, const std::string& what) {
  fmt::print("  {} {}\n", ok ? "ok  " : "FAIL", what);
  if (!ok) ++failures;
}

long long count_orders(const std::string& uri, const std::string& request_id) {
  pqxx::connection c(uri);
  pqxx::nontransaction n(c);
  return n
      .exec_params("SELECT count(*) FROM idem_example_orders WHERE request_id = $1",
                   request_id)[0][0]
      .as<long long>();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(
        "example_orders_postgres: no PostgreSQL URI given, nothing to do.\n"
        "usage: {} postgresql://user@host:5432/db\n",
        argv[0]);
    return 0;
  }
  const std::string uri = argv[1];
  try {  // The service's own table, fresh for the demo.
    pqxx::connection c(uri);
    pqxx::work w(c);
    w.exec("DROP TABLE IF EXISTS idem_example_orders");
    w.exec("DROP TABLE IF EXISTS idem_example_records");
    w.exec("DROP TABLE IF EXISTS idem_example_schema");
    w.exec(
        "CREATE TABLE idem_example_orders (id bigserial PRIMARY KEY, request_id text NOT NULL, "
        "customer text NOT NULL, item text NOT NULL, quantity int NOT NULL)");
    w.commit();
  } catch (const std::exception& e) {
    fmt::print(stderr, "cannot prepare the database: {}\n", e.what());
    return 1;
  }

  idem::PostgresStore store{
      idem::PostgresStoreOptions{.connection = {.uri = uri, .table_prefix = "idem_example_"},
                                 .mode = idem::SqlMode::transactional}};
  idem::IdempotencyGuard guard{store, idem::Options{.scope = "orders.place"}};

  auto place = [&](const std::string& request_id, const Order& order) {
    const std::string payload = fmt::format("{}|{}|{}", order.customer, order.item, order.quantity);
    return guard.execute(request_id, payload, [&](idem::Context& ctx) {
      if (order.quantity <= 0) throw std::invalid_argument("quantity must be positive");
      pqxx::dbtransaction& tx = idem::pg_transaction(ctx);  // the claim's open transaction
      const auto id =
          tx.exec_params1(
                "INSERT INTO idem_example_orders (request_id, customer, item, quantity) "
                "VALUES ($1, $2, $3, $4) RETURNING id",
                request_id, order.customer, order.item, order.quantity)[0]
              .as<long long>();
      return fmt::format("order #{} for {}", id, order.customer);
    });
  };

  fmt::print("orders on {}\n", uri);
  const Order order{"ada", "teapot", 2};
  auto first = place("req-1", order);
  check(first.has_value() && !first.replayed(),
        "first request places the order: " + (first ? first.value() : first.error().message()));
  auto retry = place("req-1", order);
  check(retry.has_value() && retry.replayed() && retry.value() == first.value(),
        "the retry replays the same confirmation");
  check(count_orders(uri, "req-1") == 1, "exactly one order row for req-1");

  bool threw = false;
  try {
    (void)place("req-2", Order{"bob", "kettle", 0});
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  check(threw && count_orders(uri, "req-2") == 0, "a failing handler rolls back: no order row");
  auto fixed = place("req-2", Order{"bob", "kettle", 1});
  check(fixed.has_value() && !fixed.replayed(), "the corrected request places the order");

  fmt::print("{}\n", failures == 0 ? "all good" : "FAILED");
  return failures == 0 ? 0 : 1;
}
