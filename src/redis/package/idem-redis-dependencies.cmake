# What idem::redis links: hiredis, through pkg-config (the imported target PkgConfig::IDEM_HIREDIS;
# hiredis's own CMake config sets variables only), and OpenSSL's libssl for TLS (OpenSSL::SSL). Read by idem's own build (idem_backends(),
# cmake/IdemBackends.cmake) and, installed, by idemConfig.cmake when a consumer asks for the redis
# component. Sets IDEM_REDIS_MISSING to what to install, or to "" when everything was found, and
# IDEM_REDIS_NEEDS to what the component needs.
set(IDEM_REDIS_NEEDS "hiredis and OpenSSL (Debian/Ubuntu: libhiredis-dev libssl-dev)")
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
if(IDEM_REDIS_MISSING STREQUAL "")
  find_package(OpenSSL QUIET COMPONENTS SSL)
  if(NOT TARGET OpenSSL::SSL)
    set(IDEM_REDIS_MISSING "OpenSSL (Debian/Ubuntu: libssl-dev)")
  endif()
endif()
