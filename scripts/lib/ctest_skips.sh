# shellcheck shell=bash
# fail_on_skips LOG WHO: fails, naming them, when the ctest output in LOG has tests that skipped
# themselves. A test that needs a server skips when its variable is unset (IDEM_TEST_PG_URI...);
# where every server was started, a skip is a test that ran nothing. WHO prefixes the message.
fail_on_skips() {
  grep -q '\*\*\*Skipped' "$1" || return 0
  grep '\*\*\*Skipped' "$1"
  echo "$2: the tests above skipped themselves; every test must run here (log: $1)"
  return 1
}
