# What idem::postgres links: libpqxx and libpq (its bounded connect calls libpq), through pkg-config (the imported target PkgConfig::IDEM_PQXX;
# Debian ships no CMake config for libpqxx). Read by idem's own build (cmake/IdemPostgres.cmake)
# and, installed, by idemConfig.cmake when a consumer asks for the postgres component. Sets
# IDEM_POSTGRES_MISSING to what to install, or to "" when everything was found.
set(IDEM_POSTGRES_MISSING "")
find_package(PkgConfig QUIET)
if(NOT PkgConfig_FOUND)
  set(IDEM_POSTGRES_MISSING "pkg-config, which finds libpqxx and libpq (Debian/Ubuntu: pkg-config)")
else()
  pkg_check_modules(IDEM_PQXX QUIET IMPORTED_TARGET libpqxx libpq)
  if(NOT TARGET PkgConfig::IDEM_PQXX)
    set(IDEM_POSTGRES_MISSING "libpqxx and libpq (Debian/Ubuntu: libpqxx-dev, libpq-dev)")
  endif()
endif()
