// The two-phase API (idem::Attempt) on PostgresStore in both modes (IDEM_TEST_PG_URI; skipped
// when unset): the shared cases of tests/two_phase, processes racing on one database, and writes
// through the claim's transaction.

#include "two_phase/sql_two_phase_cases.hpp"

namespace idem::testing {
namespace {

IDEM_SQL_TWO_PHASE_TESTS(Postgres, Backend::postgres);

}  // namespace
}  // namespace idem::testing
