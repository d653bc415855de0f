# Detects the dependencies of the SQLite adapter idem_sqlite (idem::sqlite, src/sqlite/) and sets
# IDEM_HAVE_SQLITE, and IDEM_SQLITE_MISSING to what to install when something is missing. What the
# adapter links (SQLiteCpp, SQLite3) is looked up in cmake/package/idem-sqlite-dependencies.cmake,
# which an installed idem's config reads too; fmt is needed only to build the adapter
# (cmake/IdemFmt.cmake).
include("${CMAKE_CURRENT_LIST_DIR}/package/idem-sqlite-dependencies.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/IdemFmt.cmake")
if(IDEM_SQLITE_MISSING STREQUAL "")
  set(IDEM_SQLITE_MISSING "${IDEM_FMT_MISSING}")
endif()
if(IDEM_SQLITE_MISSING STREQUAL "")
  set(IDEM_HAVE_SQLITE ON)
else()
  set(IDEM_HAVE_SQLITE OFF)
endif()
