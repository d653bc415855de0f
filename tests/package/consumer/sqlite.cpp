// The SQLite adapter: a store on a temp file, run for real in transactional mode, and a replay.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <idem/idem.hpp>
#include <idem/sqlite/store.hpp>
#include <idem/sqlite/transaction.hpp>
#include <string>

int main() {
  const auto path = std::filesystem::temp_directory_path() /
                    ("idem_package_sqlite_" + std::to_string(::getpid()) + ".db");
  const auto remove_files = [&] {
    for (const char* s : {"", "-wal", "-shm", "-fences"})
      std::filesystem::remove(path.string() + s);
  };
  remove_files();
  bool ok = false;
  {
    idem::SqliteStore store{
        idem::SqliteStoreOptions{.path = path.string(), .mode = idem::SqlMode::transactional}};
    idem::IdempotencyGuard guard{store, idem::Options{.scope = "consumer"}};
    auto first = guard.execute("k", [](idem::Context& ctx) {
      idem::sqlite_transaction(ctx).exec("CREATE TABLE IF NOT EXISTS t (x INTEGER)");
      return 42;
    });
    auto again = guard.execute("k", [](idem::Context&) { return 7; });
    ok = first.has_value() && again.has_value() && again.replayed() && again.value() == 42;
  }
  remove_files();
  std::printf("idem::sqlite consumer: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
