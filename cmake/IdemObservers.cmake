# The optional observer components, each built when IDEM_WITH_<NAME> is on (the top-level
# CMakeLists.txt sets the options from cmake/IdemPrometheus.cmake and cmake/IdemSpdlog.cmake):
#   idem::prometheus  (idem_prometheus, static): prometheus-cpp 1.0 (Debian: prometheus-cpp-dev)
#   idem::spdlog      (idem_spdlog, header-only): spdlog (Debian: libspdlog-dev)
if(IDEM_WITH_PROMETHEUS)
  add_library(idem_prometheus STATIC ${PROJECT_SOURCE_DIR}/src/prometheus/prometheus_metrics.cpp
                                     ${PROJECT_SOURCE_DIR}/src/prometheus/store_collectable.cpp)
  add_library(idem::prometheus ALIAS idem_prometheus)
  set_target_properties(idem_prometheus PROPERTIES EXPORT_NAME prometheus
                                                   POSITION_INDEPENDENT_CODE ON)
  target_link_libraries(idem_prometheus PUBLIC idem::idem prometheus-cpp::core)
  idem_target_headers(idem_prometheus PUBLIC ${IDEM_PROMETHEUS_HEADERS})
  idem_target_warnings(idem_prometheus)
endif()

if(IDEM_WITH_SPDLOG)
  add_library(idem_spdlog INTERFACE)
  add_library(idem::spdlog ALIAS idem_spdlog)
  set_target_properties(idem_spdlog PROPERTIES EXPORT_NAME spdlog)
  target_link_libraries(idem_spdlog INTERFACE idem::idem spdlog::spdlog)
  idem_target_headers(idem_spdlog INTERFACE ${IDEM_SPDLOG_HEADERS})
endif()
