// Uses both SQL adapters through the installed package: a SQLite store on a temp file, run for
// real, and a PostgreSQL store on an unreachable server, which must answer store_unavailable.

#include <idem/idem.hpp>
#include <idem/stores/postgres_store.hpp>
#include <idem/stores/postgres_transaction.hpp>
#include <idem/stores/sqlite_store.hpp>
#include <idem/stores/sqlite_transaction.hpp>

#include <cstdio>
#include <filesystem>
#include <string>

int main() {
  const auto path = std::filesystem::temp_directory_path() / "idem_sql_consumer.db";
  for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + s);
  int ok = 0;
  {
    idem::SqliteStore store{idem::SqliteStoreOptions{.path = path.string(),
                                                     .mode = idem::SqlMode::transactional}};
    idem::IdempotencyGuard guard{store, idem::Options{.scope = "consumer"}};
    auto first = guard.execute("k", [](idem::Context& ctx) {
      idem::sqlite_transaction(ctx).exec("CREATE TABLE IF NOT EXISTS t (x INTEGER)");
      return 42;
    });
    auto again = guard.execute("k", [](idem::Context&) { return 7; });
    ok += first.has_value() && again.has_value() && again.replayed() && again.value() == 42;
  }
  {
    idem::PostgresStore store{
        idem::PostgresStoreOptions{.uri = "postgresql://nobody@127.0.0.1:1/none"}};
    idem::IdempotencyGuard guard{store, idem::Options{.scope = "consumer"}};
    auto out = guard.execute("k", [] { return 1; });
    ok += !out.has_value() && out.error() == idem::errc::store_unavailable;
  }
  for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + s);
  std::printf("sql consumer: %s\n", ok == 2 ? "ok" : "FAILED");
  return ok == 2 ? 0 : 1;
}
