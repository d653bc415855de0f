#pragma once
// What every fuzz target shares: an invariant check that stops the run (and so makes libFuzzer
// keep the input) whatever NDEBUG says, and the errc test the targets assert with.

#include <cstdio>
#include <cstdlib>
#include <system_error>

#include "idem/error.hpp"

#define IDEM_FUZZ_CHECK(cond)                                                           \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)

namespace idem::fuzz {

inline bool is(std::error_code ec, errc e) { return ec == make_error_code(e); }

}  // namespace idem::fuzz
