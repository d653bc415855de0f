// The two-phase API (idem::Attempt) on SqliteStore in both modes: the shared cases of
// tests/two_phase, processes racing on one file, and writes through the claim's transaction.

#include "two_phase/sql_two_phase_cases.hpp"

namespace idem::testing {
namespace {

IDEM_SQL_TWO_PHASE_TESTS(Sqlite, Backend::sqlite);

}  // namespace
}  // namespace idem::testing
