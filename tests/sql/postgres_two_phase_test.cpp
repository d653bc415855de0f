// The two-phase API (idem::Attempt) on PostgresStore in both modes (IDEM_TEST_PG_URI; skipped
// when unset): the shared cases of tests/two_phase, processes racing on one database, and writes
// through the claim's transaction.

#include "two_phase/sql_two_phase_cases.hpp"

namespace idem::testing {
namespace {

using PostgresLease = SqlBackend<Backend::postgres, SqlMode::lease>;
using PostgresTransactional = SqlBackend<Backend::postgres, SqlMode::transactional>;
using BothModes = ::testing::Types<PostgresLease, PostgresTransactional>;

INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, TwoPhaseTest, BothModes, BackendNames);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, TwoPhaseLeaseTest, PostgresLease, BackendNames);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, TwoPhaseProcessTest, BothModes, BackendNames);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, TwoPhaseTransactionTest, PostgresTransactional,
                               BackendNames);

}  // namespace
}  // namespace idem::testing
