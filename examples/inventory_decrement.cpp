// Inventory decrements with optimistic versions on SQLite: eight buyers take stock of one item at
// once; each decrement is a compare-and-set on the item's version, retried from the version the
// conflict reports, and runs once per order even when the order is retried.
//
//   build/examples/example_inventory_decrement [path/to/shop.db]   (default: a temp file)

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <fmt/format.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "idem/idem.hpp"
#include "idem/sqlite/entities.hpp"
#include "idem/sqlite/transaction.hpp"
#include "idem/version_store.hpp"

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

long long stock_of(const std::string& path) {
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  return db.execAndGet("SELECT stock FROM inventory WHERE sku = 'teapot'").getInt64();
}

struct OutOfStock : std::runtime_error {
  OutOfStock() : std::runtime_error("out of stock") {}
};

int run(const std::filesystem::path& path) {
  {
    SQLite::Database db(path.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec(
        "CREATE TABLE IF NOT EXISTS inventory (sku TEXT PRIMARY KEY, version INTEGER NOT NULL, "
        "stock INTEGER NOT NULL);"
        "INSERT INTO inventory VALUES ('teapot', 0, 20)");
  }
  idem::VersionStore<idem::SqliteBackend> inventory{idem::VersionStoreOptions<idem::SqliteBackend>{
      .backend = {.path = path.string()},
      .table = {.table = "inventory", .id_column = "sku", .column = "version"}}};

  // Takes `n` teapots for `order`: reads the stock inside the claim's transaction (the version
  // was just bumped from the one we read, so nobody else changed it), writes it back.
  auto take = [&](const std::string& order, long long n) {
    return inventory.retry("teapot", order, std::to_string(n), [&](idem::Context& ctx) {
      SQLite::Database& db = idem::sqlite_transaction(ctx);
      const long long stock =
          db.execAndGet("SELECT stock FROM inventory WHERE sku = 'teapot'").getInt64();
      if (stock < n) throw OutOfStock();
      SQLite::Statement update(db, "UPDATE inventory SET stock = ?1 WHERE sku = 'teapot'");
      update.bind(1, static_cast<std::int64_t>(stock - n));
      update.exec();
      return stock - n;
    });
  };

  fmt::print("inventory on {}\n", path.string());
  std::atomic<long long> taken{0};
  std::atomic<int> attempts{0}, errors{0};
  std::vector<std::thread> buyers;
  for (int i = 0; i < 8; ++i) {
    buyers.emplace_back([&, i] {
      auto out = take("order-" + std::to_string(i), 2);
      if (!out) {
        ++errors;
        return;
      }
      taken += 2;
      attempts += out.attempts();
    });
  }
  for (auto& b : buyers) b.join();
  check(errors == 0 && taken == 16, "eight buyers took 2 teapots each");
  check(stock_of(path.string()) == 4, "stock went from 20 to 4: no lost update");
  check(inventory.version("teapot").value() == 8, "the item's version moved 8 times");
  fmt::print("  ({} calls for 8 decrements: the rest were version conflicts, retried)\n",
             attempts.load());

  auto repeat = take("order-3", 2);  // order-3's response was lost; the client retries
  check(repeat.has_value() && repeat.replayed(), "a retried order replays, takes nothing");
  check(stock_of(path.string()) == 4, "stock is still 4");

  auto stale = inventory.execute({.entity = "teapot", .expected_version = 2}, [] { return 0; });
  check(stale.error() == idem::errc::version_conflict && stale.current_version() == 8u,
        "a stale version is refused with the current one: " + stale.message());

  bool out_of_stock = false;
  try {
    (void)take("order-big", 10);
  } catch (const OutOfStock&) {
    out_of_stock = true;
  }
  check(out_of_stock && stock_of(path.string()) == 4 && inventory.version("teapot").value() == 8,
        "an order for more than is left rolls back: stock and version unchanged");

  fmt::print("{}\n", failures == 0 ? "all good" : "FAILED");
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) return run(argv[1]);
  const auto path = std::filesystem::temp_directory_path() / "idem_example_inventory.db";
  remove_db(path);
  const int rc = run(path);
  remove_db(path);
  return rc;
}
