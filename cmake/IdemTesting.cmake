# Detects the dependency of the conformance kit idem_testing (idem::testing, include/idem/testing/),
# GoogleTest, and sets IDEM_HAVE_TESTING, and IDEM_TESTING_MISSING to what to install when it is
# missing. The lookup is cmake/package/idem-testing-dependencies.cmake, which an installed idem's
# config reads too.
include("${CMAKE_CURRENT_LIST_DIR}/package/idem-testing-dependencies.cmake")
if(IDEM_TESTING_MISSING STREQUAL "")
  set(IDEM_HAVE_TESTING ON)
else()
  set(IDEM_HAVE_TESTING OFF)
endif()
