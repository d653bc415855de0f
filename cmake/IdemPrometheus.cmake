# Detects the dependency of the metrics observer idem_prometheus (idem::prometheus,
# include/idem/prometheus.hpp), prometheus-cpp, and sets IDEM_HAVE_PROMETHEUS, and
# IDEM_PROMETHEUS_MISSING to what to install when it is missing (the lookup is
# cmake/package/idem-prometheus-dependencies.cmake, which an installed idem's config reads too).
include("${CMAKE_CURRENT_LIST_DIR}/package/idem-prometheus-dependencies.cmake")
if(IDEM_PROMETHEUS_MISSING STREQUAL "")
  set(IDEM_HAVE_PROMETHEUS ON)
else()
  set(IDEM_HAVE_PROMETHEUS OFF)
endif()
