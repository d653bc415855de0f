# Detects the dependencies of the PostgreSQL adapter idem_postgres (idem::postgres, src/postgres/)
# and sets IDEM_HAVE_POSTGRES, and IDEM_POSTGRES_MISSING to what to install when something is
# missing. What the adapter links (libpqxx) is looked up in
# cmake/package/idem-postgres-dependencies.cmake, which an installed idem's config reads too; fmt
# is needed only to build the adapter (cmake/IdemFmt.cmake).
include("${CMAKE_CURRENT_LIST_DIR}/package/idem-postgres-dependencies.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/IdemFmt.cmake")
if(IDEM_POSTGRES_MISSING STREQUAL "")
  set(IDEM_POSTGRES_MISSING "${IDEM_FMT_MISSING}")
endif()
if(IDEM_POSTGRES_MISSING STREQUAL "")
  set(IDEM_HAVE_POSTGRES ON)
else()
  set(IDEM_HAVE_POSTGRES OFF)
endif()
# What was found and what is needed, in every configure's output; the version stays in the cache
# for scripts (scripts/pqxx7 checks which libpqxx a build found).
if(NOT IDEM_PQXX_VERSION STREQUAL "")
  string(CONCAT _idem_pqxx_found "idem: libpqxx ${IDEM_PQXX_VERSION} found (pkg-config, headers "
                "in ${IDEM_PQXX_libpqxx_INCLUDEDIR})")
  set(_idem_pqxx_needs
      "the PostgreSQL adapter needs 6.4, or 7.7 or later (tested: 6.4 and 7.10, 8.x untested)")
  if(IDEM_HAVE_POSTGRES)
    message(STATUS "${_idem_pqxx_found}; ${_idem_pqxx_needs}")
  else()
    message(STATUS "${_idem_pqxx_found}, but ${_idem_pqxx_needs}: no PostgreSQL adapter")
  endif()
  set(IDEM_PQXX_VERSION "${IDEM_PQXX_VERSION}" CACHE INTERNAL "libpqxx version found")
elseif(NOT IDEM_POSTGRES_MISSING STREQUAL "")
  message(STATUS "idem: no PostgreSQL adapter without ${IDEM_POSTGRES_MISSING}")
endif()
