# IDEM_SANITIZE: build idem's own targets (adapters, tests, examples, benchmarks, tools) under
# sanitizers. A comma-separated list passed to -fsanitize=, e.g. "address,undefined" or "thread";
# empty (the default) builds without. scripts/sanitize is the job that uses it.
#
# The flags are directory-scoped (add_compile_options/add_link_options), so they reach every target
# this project defines but never a consumer's targets through idem::idem's usage requirements.
# Every report is fatal (-fno-sanitize-recover=all): a test that trips one fails.
set(IDEM_SANITIZE "" CACHE STRING
    "Sanitizers for idem's own targets, as in -fsanitize= (e.g. address,undefined or thread)")

if(IDEM_SANITIZE STREQUAL "")
  return()
endif()

if(MSVC)
  message(FATAL_ERROR "IDEM_SANITIZE is only supported with GCC and Clang")
endif()

string(REPLACE "," ";" _idem_sanitizers "${IDEM_SANITIZE}")
if("thread" IN_LIST _idem_sanitizers AND ("address" IN_LIST _idem_sanitizers OR
                                          "leak" IN_LIST _idem_sanitizers))
  message(FATAL_ERROR "IDEM_SANITIZE: thread cannot be combined with address or leak")
endif()

# Fail at configure time, with the compiler's own message, rather than at the first link.
include(CheckCXXSourceCompiles)
set(CMAKE_REQUIRED_FLAGS "-fsanitize=${IDEM_SANITIZE}")
set(CMAKE_REQUIRED_LINK_OPTIONS "-fsanitize=${IDEM_SANITIZE}")
string(MAKE_C_IDENTIFIER "IDEM_SANITIZE_${IDEM_SANITIZE}_WORKS" _idem_sanitize_check)
check_cxx_source_compiles("int main() { return 0; }" ${_idem_sanitize_check})
unset(CMAKE_REQUIRED_FLAGS)
unset(CMAKE_REQUIRED_LINK_OPTIONS)
if(NOT ${_idem_sanitize_check})
  message(FATAL_ERROR "IDEM_SANITIZE=${IDEM_SANITIZE}: ${CMAKE_CXX_COMPILER} cannot build and link "
                      "with -fsanitize=${IDEM_SANITIZE} (is the sanitizer runtime installed?)")
endif()

# Frame pointers keep the reports' stacks whole even where the unwinder gives up.
add_compile_options(-fsanitize=${IDEM_SANITIZE} -fno-omit-frame-pointer
                    -fno-sanitize-recover=all)
add_link_options(-fsanitize=${IDEM_SANITIZE})
if("address" IN_LIST _idem_sanitizers)
  # libstdc++'s cheap bounds checks (operator[], front(), back() on an empty container...) are
  # ABI-neutral and catch what ASan cannot see inside a container's spare capacity.
  add_compile_definitions(_GLIBCXX_ASSERTIONS)
endif()
message(STATUS "idem: sanitizers: ${IDEM_SANITIZE}")
