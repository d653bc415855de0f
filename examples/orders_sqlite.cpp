// An orders service on SQLite in transactional mode: the business insert and the idempotency
// record commit in one transaction, so a retried request places its order exactly once and a
// failed one leaves nothing behind.
//
//   build/examples/example_orders_sqlite [path/to/orders.db]   (default: a temp file)

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "idem/idem.hpp"
#include "idem/sqlite/store.hpp"
#include "idem/sqlite/transaction.hpp"

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

long long count_orders(const std::string& path, const std::string& request_id) {
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  SQLite::Statement st(db, "SELECT count(*) FROM orders WHERE request_id = ?1");
  st.bind(1, request_id);
  st.executeStep();
  return st.getColumn(0).getInt64();
}

void remove_db(const std::filesystem::path& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-fences"})
    std::filesystem::remove(path.string() + suffix);
}

int run(const std::filesystem::path& path);

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) return run(argv[1]);
  const auto path = std::filesystem::temp_directory_path() / "idem_example_orders.db";
  remove_db(path);
  const int rc = run(path);
  remove_db(path);  // our temp file: leave nothing behind
  return rc;
}

namespace {

int run(const std::filesystem::path& path) {
  {  // The service's own table.
    SQLite::Database db(path.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec(
        "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, request_id TEXT NOT NULL, "
        "customer TEXT NOT NULL, item TEXT NOT NULL, quantity INTEGER NOT NULL)");
  }

  idem::SqliteStore store{
      idem::SqliteStoreOptions{.path = path.string(), .mode = idem::SqlMode::transactional}};
  idem::IdempotencyGuard guard{store, idem::Options{.scope = "orders.place"}};

  // Places an order; the request id is the idempotency key, the order its payload.
  auto place = [&](const std::string& request_id, const Order& order) {
    const std::string payload = fmt::format("{}|{}|{}", order.customer, order.item, order.quantity);
    return guard.execute(request_id, payload, [&](idem::Context& ctx) {
      if (order.quantity <= 0) throw std::invalid_argument("quantity must be positive");
      SQLite::Database& db = idem::sqlite_transaction(ctx);  // the claim's open transaction
      SQLite::Statement insert(db,
                               "INSERT INTO orders (request_id, customer, item, quantity) "
                               "VALUES (?1, ?2, ?3, ?4)");
      insert.bind(1, request_id);
      insert.bind(2, order.customer);
      insert.bind(3, order.item);
      insert.bind(4, order.quantity);
      insert.exec();
      return fmt::format("order #{} for {}", db.getLastInsertRowid(), order.customer);
    });
  };

  fmt::print("orders on {}\n", path.string());
  const Order order{"ada", "teapot", 2};
  auto first = place("req-1", order);
  check(first.has_value() && !first.replayed(),
        "first request places the order: " + (first ? first.value() : first.error().message()));
  auto retry = place("req-1", order);  // the client timed out and sent it again
  check(retry.has_value() && retry.replayed() && retry.value() == first.value(),
        "the retry replays the same confirmation");
  check(count_orders(path.string(), "req-1") == 1, "exactly one order row for req-1");

  auto misuse = place("req-1", Order{"ada", "teapot", 3});
  check(!misuse && misuse.error() == idem::errc::payload_mismatch,
        "the same request id with another order is refused (HTTP " +
            std::to_string(idem::http_status(misuse.error())) + ")");

  bool threw = false;
  try {
    (void)place("req-2", Order{"bob", "kettle", 0});
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  check(threw && count_orders(path.string(), "req-2") == 0,
        "a failing handler rolls back: no order row");
  // Nothing was recorded, so the key is free: the corrected request (another payload) runs.
  auto fixed = place("req-2", Order{"bob", "kettle", 1});
  check(fixed.has_value() && !fixed.replayed(), "the corrected request places the order");
  check(count_orders(path.string(), "req-2") == 1, "exactly one order row for req-2");

  const auto purged = store.purge_expired();
  check(purged.has_value() && purged.value() == 0, "nothing has expired yet");

  fmt::print("{}\n", failures == 0 ? "all good" : "FAILED");
  return failures == 0 ? 0 : 1;
}

}  // namespace
