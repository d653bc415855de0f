# Detects libpqxx and libpq (via pkg-config; Debian ships no CMake config for them) and sets
# IDEM_HAVE_POSTGRES. The adapter calls libpq itself for its bounded connect.
# The adapter idem_postgres (src/sql/CMakeLists.txt) also formats its messages with fmt.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(IDEM_PQXX QUIET IMPORTED_TARGET libpqxx libpq)
endif()

find_package(fmt QUIET)
if(TARGET PkgConfig::IDEM_PQXX AND fmt_FOUND)
  set(IDEM_HAVE_POSTGRES ON)
else()
  set(IDEM_HAVE_POSTGRES OFF)
endif()
