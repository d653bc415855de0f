# Detects the dependency of the logging observer idem_spdlog (idem::spdlog,
# include/idem/spdlog.hpp), spdlog, and sets IDEM_HAVE_SPDLOG, and IDEM_SPDLOG_MISSING to what to
# install when it is missing (the lookup is cmake/package/idem-spdlog-dependencies.cmake, which an
# installed idem's config reads too).
include("${CMAKE_CURRENT_LIST_DIR}/package/idem-spdlog-dependencies.cmake")
if(IDEM_SPDLOG_MISSING STREQUAL "")
  set(IDEM_HAVE_SPDLOG ON)
else()
  set(IDEM_HAVE_SPDLOG OFF)
endif()
