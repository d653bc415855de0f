# What idem::prometheus links: prometheus-cpp's core library, from its own CMake config. Read by
# idem's own build (cmake/IdemPrometheus.cmake) and, installed, by idemConfig.cmake when a consumer
# asks for the prometheus component. Sets IDEM_PROMETHEUS_MISSING to what to install, or to "" when
# it was found.
set(IDEM_PROMETHEUS_MISSING "")
if(NOT TARGET prometheus-cpp::core)
  find_package(prometheus-cpp CONFIG QUIET)
endif()
if(NOT TARGET prometheus-cpp::core)
  set(IDEM_PROMETHEUS_MISSING "prometheus-cpp 1.0 (Debian/Ubuntu: prometheus-cpp-dev)")
endif()
