// VersionStore and StateMachineStore on SQLite: the typed entity suite, processes, injection.

#include "entity/sql_entity_cases.hpp"

namespace idem::testing {

INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, EntityStoreTest, SqliteTarget);
INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, EntityProcessTest, SqliteTarget);

TEST(SqliteEntityStoreTest, TableAndColumnNamesThatAreNotIdentifiersAreRefused) {
  expect_injection_refused<SqliteBackend>(SqliteStoreOptions{.path = "/tmp/unused.db"});
}

}  // namespace idem::testing
