# Detects the SQLite backend's dependencies and sets IDEM_HAVE_SQLITE.
# Detection only: the idem_sqlite adapter target does not exist yet.
# Debian's SQLiteCpp config exports a static imported target `SQLiteCpp` and itself
# needs SQLite3 and Threads, so look those up first to give a clearer answer.
find_package(SQLite3 QUIET)
find_package(Threads QUIET)
find_package(SQLiteCpp CONFIG QUIET)

if(SQLite3_FOUND AND Threads_FOUND AND TARGET SQLiteCpp)
  set(IDEM_HAVE_SQLITE ON)
else()
  set(IDEM_HAVE_SQLITE OFF)
endif()
