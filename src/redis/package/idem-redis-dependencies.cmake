# What idem::redis links: hiredis, through pkg-config (the imported target PkgConfig::IDEM_HIREDIS;
# hiredis's own CMake config sets variables only). Read by idem's own build (idem_backends(),
# cmake/IdemBackends.cmake) and, installed, by idemConfig.cmake when a consumer asks for the redis
# component. Sets IDEM_REDIS_MISSING to what to install, or to "" when everything was found, and
# IDEM_REDIS_NEEDS to what the component needs.
set(IDEM_REDIS_NEEDS "hiredis (Debian/Ubuntu: libhiredis-dev)")
set(IDEM_REDIS_MISSING "")
find_package(PkgConfig QUIET)
if(NOT PkgConfig_FOUND)
  set(IDEM_REDIS_MISSING "pkg-config, which finds hiredis (Debian/Ubuntu: pkg-config)")
else()
  pkg_check_modules(IDEM_HIREDIS QUIET IMPORTED_TARGET hiredis)
  if(NOT TARGET PkgConfig::IDEM_HIREDIS)
    set(IDEM_REDIS_MISSING "hiredis (Debian/Ubuntu: libhiredis-dev)")
  endif()
endif()
