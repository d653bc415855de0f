// The PostgreSQL adapter, linked and run without a server: an unreachable PostgreSQL must answer
// store_unavailable.
#include <cstdio>
#include <idem/idem.hpp>
#include <idem/postgres/store.hpp>
#include <idem/postgres/transaction.hpp>

int main() {
  idem::PostgresStore store{
      idem::PostgresStoreOptions{.connection = {.uri = "postgresql://nobody@127.0.0.1:1/none"}}};
  idem::IdempotencyGuard guard{store, idem::Options{.scope = "consumer"}};
  auto out = guard.execute("k", [] { return 1; });
  const bool ok = !out.has_value() && out.error() == idem::errc::store_unavailable;
  std::printf("idem::postgres consumer: %s\n", ok ? "ok" : out.message().c_str());
  return ok ? 0 : 1;
}
