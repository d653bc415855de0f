// An order's lifecycle as a state machine on SQLite: each event (PAY, SHIP, ...) moves the order
// once, the handler's writes commit with the transition, a retried event replays its result,
// and an event that does not fit the order's state is refused naming both.
//
//   build/examples/example_order_lifecycle [path/to/orders.db]   (default: a temp file)

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <fmt/format.h>

#include <filesystem>
#include <stdexcept>
#include <string>

#include "idem/idem.hpp"
#include "idem/sqlite/entities.hpp"
#include "idem/sqlite/transaction.hpp"
#include "idem/state_machine_store.hpp"

namespace {

int failures = 0;
void check(bool ok, const std::string& what) {
  fmt::print("  {} {}\n", ok ? "ok  " : "FAIL", what);
  if (!ok) ++failures;
}

void remove_db(const std::filesystem::path& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-fences"})
    std::filesystem::remove(path.string() + suffix);
}

long long count(const std::string& path, const std::string& sql) {
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  return db.execAndGet(sql).getInt64();
}

int run(const std::filesystem::path& path) {
  {  // The service's own tables: the orders, with their state, and the payments.
    SQLite::Database db(path.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec(
        "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, state TEXT NOT NULL);"
        "CREATE TABLE IF NOT EXISTS payments (order_id TEXT NOT NULL, amount INTEGER NOT NULL);"
        "INSERT INTO orders VALUES ('order-42', 'CREATED'), ('order-43', 'CREATED')");
  }

  // The transition table, checked when built (unknown states, duplicate events, unreachable
  // states throw std::invalid_argument).
  const idem::TransitionTable lifecycle{
      "CREATED",
      {"CREATED", "PAID", "SHIPPED", "COMPLETED", "REFUNDING", "REFUNDED"},
      {{"PAY", {"CREATED"}, "PAID"},
       {"SHIP", {"PAID"}, "SHIPPED"},
       {"COMPLETE", {"SHIPPED"}, "COMPLETED"},
       {"REFUND", {"PAID"}, "REFUNDING"},
       {"REFUNDED", {"REFUNDING"}, "REFUNDED"}}};
  fmt::print("{}\n", lifecycle.mermaid());

  using Store = idem::StateMachineStore<idem::TransitionTable, idem::SqliteBackend>;
  Store orders{lifecycle, idem::StateMachineStoreOptions<idem::SqliteBackend>{
                              .backend = {.path = path.string()},
                              .table = {.table = "orders", .id_column = "id", .column = "state"}}};

  // PAY records the payment in the transition's own transaction.
  auto pay = [&](const std::string& order, long long amount) {
    return orders.execute({.entity = order, .event = "PAY"}, std::to_string(amount),
                          [&](idem::Context& ctx) {
                            SQLite::Statement insert(idem::sqlite_transaction(ctx),
                                                     "INSERT INTO payments VALUES (?1, ?2)");
                            insert.bind(1, order);
                            insert.bind(2, static_cast<std::int64_t>(amount));
                            insert.exec();
                            return fmt::format("paid {} for {}", amount, order);
                          });
  };
  auto event = [&](const std::string& order, const char* name) {
    return orders.execute({.entity = order, .event = name},
                          [&] { return fmt::format("{} {}", name, order); });
  };

  fmt::print("orders on {}\n", path.string());
  auto paid = pay("order-42", 1999);
  check(paid.has_value() && paid.executed(),
        "PAY moves order-42 to PAID: " + (paid ? paid.value() : paid.message()));
  auto again = pay("order-42", 1999);  // the client retried
  check(again.has_value() && again.replayed() && again.value() == paid.value(),
        "a retried PAY replays its receipt");
  check(count(path.string(), "SELECT count(*) FROM payments WHERE order_id = 'order-42'") == 1,
        "exactly one payment row");

  auto early = event("order-43", "SHIP");
  check(early.error() == idem::errc::invalid_transition && early.current_state() == "CREATED",
        "SHIP before PAY is refused: " + early.message());
  auto complete = event("order-43", "COMPLETE");
  check(complete.error() == idem::errc::invalid_transition,
        "COMPLETE from CREATED is refused (HTTP " +
            std::to_string(idem::http_status(complete.error())) + ")");

  bool threw = false;
  try {
    (void)orders.execute({.entity = "order-43", .event = "PAY"}, [&](idem::Context& ctx) -> int {
      SQLite::Statement insert(idem::sqlite_transaction(ctx),
                               "INSERT INTO payments VALUES ('order-43', 5)");
      insert.exec();
      throw std::runtime_error("card declined");
    });
  } catch (const std::runtime_error&) {
    threw = true;
  }
  check(threw && orders.state("order-43").value() == "CREATED" &&
            count(path.string(), "SELECT count(*) FROM payments WHERE order_id = 'order-43'") == 0,
        "a declined payment rolls back: order-43 still CREATED, no payment row");

  for (const char* name : {"SHIP", "COMPLETE"}) {
    auto out = event("order-42", name);
    check(out.has_value(), std::string(name) + " order-42: " + (out ? out.value() : out.message()));
  }
  check(orders.state("order-42").value() == "COMPLETED", "order-42 is COMPLETED");

  fmt::print("{}\n", failures == 0 ? "all good" : "FAILED");
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) return run(argv[1]);
  const auto path = std::filesystem::temp_directory_path() / "idem_example_order_lifecycle.db";
  remove_db(path);
  const int rc = run(path);
  remove_db(path);
  return rc;
}
