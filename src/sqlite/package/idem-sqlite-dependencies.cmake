# What idem::sqlite links: SQLiteCpp (its CMake config's imported target SQLiteCpp), which needs
# SQLite3 and Threads found first. Read by idem's own build (idem_backends(), cmake/IdemBackends.cmake)
# and, installed, by idemConfig.cmake when a consumer asks for the sqlite component. Sets
# IDEM_SQLITE_MISSING to what to install, or to "" when everything was found; IDEM_SQLITE_NEEDS to
# what the component needs, and IDEM_SQLITE_PC_FLAGS_FROM to the imported targets whose flags its
# .pc file spells out (SQLiteCpp ships no .pc file).
set(IDEM_SQLITE_NEEDS "SQLiteCpp and SQLite3 (Debian/Ubuntu: libsqlitecpp-dev)")
set(IDEM_SQLITE_PC_FLAGS_FROM SQLiteCpp)
set(IDEM_SQLITE_MISSING "")
find_package(SQLite3 QUIET)
find_package(Threads QUIET)
if(NOT SQLite3_FOUND)
  set(IDEM_SQLITE_MISSING "SQLite3 (Debian/Ubuntu: libsqlite3-dev)")
elseif(NOT Threads_FOUND)
  set(IDEM_SQLITE_MISSING "a threads library (Threads), which SQLiteCpp links")
else()
  if(NOT TARGET SQLiteCpp)
    find_package(SQLiteCpp CONFIG QUIET)
  endif()
  if(NOT TARGET SQLiteCpp)
    set(IDEM_SQLITE_MISSING "SQLiteCpp (Debian/Ubuntu: libsqlitecpp-dev)")
  endif()
endif()
