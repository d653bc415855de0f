// SqliteStore: bad input, sizes, purge, transactional mode, and processes racing on one file.

#include "sql/sql_cases.hpp"

namespace idem::testing {

INSTANTIATE_TEST_SUITE_P(Sqlite, SqlStoreTest,
                         ::testing::Values(Config{Backend::sqlite, SqlMode::lease},
                                           Config{Backend::sqlite, SqlMode::transactional}),
                         config_name);
INSTANTIATE_TEST_SUITE_P(Sqlite, SqlTransactionalTest,
                         ::testing::Values(Config{Backend::sqlite, SqlMode::transactional}),
                         config_name);
INSTANTIATE_TEST_SUITE_P(Sqlite, SqlProcessTest,
                         ::testing::Values(Config{Backend::sqlite, SqlMode::lease},
                                           Config{Backend::sqlite, SqlMode::transactional}),
                         config_name);

}  // namespace idem::testing
