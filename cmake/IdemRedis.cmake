# Detects hiredis (via pkg-config, which every distribution ships; its CMake config is not
# universal) and sets IDEM_HAVE_REDIS. Detection only: the idem_redis adapter target does not
# exist yet.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(IDEM_HIREDIS QUIET IMPORTED_TARGET hiredis)
endif()

if(TARGET PkgConfig::IDEM_HIREDIS)
  set(IDEM_HAVE_REDIS ON)
else()
  set(IDEM_HAVE_REDIS OFF)
endif()
