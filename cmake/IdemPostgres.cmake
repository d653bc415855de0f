# Detects libpqxx (via pkg-config; Debian ships no CMake config for it) and sets IDEM_HAVE_POSTGRES.
# Detection only: the idem_postgres adapter target does not exist yet.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(IDEM_PQXX QUIET IMPORTED_TARGET libpqxx)
endif()

if(TARGET PkgConfig::IDEM_PQXX)
  set(IDEM_HAVE_POSTGRES ON)
else()
  set(IDEM_HAVE_POSTGRES OFF)
endif()
