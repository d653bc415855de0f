# Detects the dependencies of the Redis adapter idem_redis (idem::redis, src/redis/) and sets
# IDEM_HAVE_REDIS, and IDEM_REDIS_MISSING to what to install when something is missing. What the
# adapter links (hiredis) is looked up in cmake/package/idem-redis-dependencies.cmake, which an
# installed idem's config reads too; fmt is needed only to build the adapter (cmake/IdemFmt.cmake).
include("${CMAKE_CURRENT_LIST_DIR}/package/idem-redis-dependencies.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/IdemFmt.cmake")
if(IDEM_REDIS_MISSING STREQUAL "")
  set(IDEM_REDIS_MISSING "${IDEM_FMT_MISSING}")
endif()
if(IDEM_REDIS_MISSING STREQUAL "")
  set(IDEM_HAVE_REDIS ON)
else()
  set(IDEM_HAVE_REDIS OFF)
endif()
