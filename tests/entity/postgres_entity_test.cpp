// VersionStore and StateMachineStore on PostgreSQL: the typed entity suite, processes,
// injection. Needs IDEM_TEST_PG_URI (skips without it; fails when it is set but unreachable).

#include "entity/sql_entity_cases.hpp"

namespace idem::testing {

INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, EntityStoreTest, PostgresTarget);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, EntityProcessTest, PostgresTarget);

TEST(PostgresEntityStoreTest, TableAndColumnNamesThatAreNotIdentifiersAreRefused) {
  // Connections are lazy: the names are refused before any server is asked.
  expect_injection_refused<PostgresBackend>(
      PostgresStoreOptions{.uri = "postgresql://nobody@127.0.0.1:1/none"});
}

}  // namespace idem::testing
