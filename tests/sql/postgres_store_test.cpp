// PostgresStore: bad input, sizes, purge, transactional mode, and processes racing on one database.

#include "sql/sql_cases.hpp"

namespace idem::testing {

INSTANTIATE_TEST_SUITE_P(Postgres, SqlStoreTest,
                         ::testing::Values(Config{Backend::postgres, SqlMode::lease},
                                           Config{Backend::postgres, SqlMode::transactional}),
                         config_name);
INSTANTIATE_TEST_SUITE_P(Postgres, SqlTransactionalTest,
                         ::testing::Values(Config{Backend::postgres, SqlMode::transactional}),
                         config_name);
INSTANTIATE_TEST_SUITE_P(Postgres, SqlProcessTest,
                         ::testing::Values(Config{Backend::postgres, SqlMode::lease},
                                           Config{Backend::postgres, SqlMode::transactional}),
                         config_name);

}  // namespace idem::testing
