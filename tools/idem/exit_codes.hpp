#pragma once
// The `idem` command's exit statuses (docs/operations.md lists them).

namespace idem::cli {

enum Exit : int {
  ok = 0,
  failed = 1,       // an unexpected error (a record idem did not write, a bug)
  usage = 2,        // bad arguments, an unknown store URI, release/forget without --yes
  unreachable = 3,  // the store cannot be reached or opened (no such file, refused, timed out)
  no_schema = 4,    // the tables are missing or at another version (idem schema migrate)
  not_found = 5,    // no record under the key, or nothing to release or forget
};

}  // namespace idem::cli
