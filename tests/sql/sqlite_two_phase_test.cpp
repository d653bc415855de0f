// The two-phase API (idem::Attempt) on SqliteStore in both modes: the shared cases of
// tests/two_phase, processes racing on one file, and writes through the claim's transaction.

#include "two_phase/sql_two_phase_cases.hpp"

namespace idem::testing {
namespace {

using SqliteLease = SqlBackend<Backend::sqlite, SqlMode::lease>;
using SqliteTransactional = SqlBackend<Backend::sqlite, SqlMode::transactional>;
using BothModes = ::testing::Types<SqliteLease, SqliteTransactional>;

INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, TwoPhaseTest, BothModes, BackendNames);
INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, TwoPhaseLeaseTest, SqliteLease, BackendNames);
INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, TwoPhaseProcessTest, BothModes, BackendNames);
INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, TwoPhaseTransactionTest, SqliteTransactional, BackendNames);

}  // namespace
}  // namespace idem::testing
