# Detects the SQLite backend's dependencies and sets IDEM_HAVE_SQLITE. The adapter idem_sqlite
# (src/sql/CMakeLists.txt) also formats its messages with fmt.
# Debian's SQLiteCpp config exports a static imported target `SQLiteCpp` and itself
# needs SQLite3 and Threads, so look those up first to give a clearer answer.
find_package(SQLite3 QUIET)
find_package(Threads QUIET)
find_package(SQLiteCpp CONFIG QUIET)
find_package(fmt QUIET)

if(SQLite3_FOUND AND Threads_FOUND AND TARGET SQLiteCpp AND fmt_FOUND)
  set(IDEM_HAVE_SQLITE ON)
else()
  set(IDEM_HAVE_SQLITE OFF)
endif()
