# Detects the dependencies of the PostgreSQL adapter idem_postgres (idem::postgres, src/sql/) and
# sets IDEM_HAVE_POSTGRES, and IDEM_POSTGRES_MISSING to what to install when something is missing.
# What the adapter links (libpqxx) is looked up in cmake/package/idem-postgres-dependencies.cmake,
# which an installed idem's config reads too; fmt is needed only to build the adapter
# (cmake/IdemFmt.cmake).
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
