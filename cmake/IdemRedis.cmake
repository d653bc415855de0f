# Detects hiredis (via pkg-config, which every distribution ships; its CMake config is not
# universal) and fmt (the adapter's messages), and sets IDEM_HAVE_REDIS. The adapter itself is
# src/redis/ (target idem_redis, idem::redis).
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(IDEM_HIREDIS QUIET IMPORTED_TARGET hiredis)
endif()
if(NOT TARGET fmt::fmt-header-only)
  find_package(fmt QUIET)
endif()

if(TARGET PkgConfig::IDEM_HIREDIS AND TARGET fmt::fmt-header-only)
  set(IDEM_HAVE_REDIS ON)
else()
  set(IDEM_HAVE_REDIS OFF)
endif()
