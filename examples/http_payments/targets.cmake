# The http_payments server (cpp-httplib from libcpp-httplib-dev via pkg-config, nlohmann-json),
# defined once: examples/ and the end-to-end tests in tests/http/ both include this file.
# Sets IDEM_HTTP_PAYMENTS to ON (in the including scope) when the server can be built.
if(TARGET http_payments)
  set(IDEM_HTTP_PAYMENTS ON)
  return()
endif()

set(IDEM_HTTP_PAYMENTS OFF)
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(CPPHTTPLIB QUIET IMPORTED_TARGET GLOBAL cpp-httplib)
endif()
find_package(nlohmann_json CONFIG QUIET)
if(NOT TARGET fmt::fmt)
  find_package(fmt CONFIG QUIET)
endif()

if(CPPHTTPLIB_FOUND AND nlohmann_json_FOUND AND IDEM_WITH_SQLITE AND IDEM_WITH_POSTGRES
   AND IDEM_WITH_REDIS)
  set(IDEM_HTTP_PAYMENTS ON)
  # The service, its command line and its HTTP transport (transport/: connections that wait
  # without a thread, whole-request deadlines, body and connection limits).
  add_library(idem_http_payments_service STATIC
    ${CMAKE_CURRENT_LIST_DIR}/command_line.cpp
    ${CMAKE_CURRENT_LIST_DIR}/transport/body_limit.cpp
    ${CMAKE_CURRENT_LIST_DIR}/transport/bounded_server.cpp
    ${CMAKE_CURRENT_LIST_DIR}/transport/canned_answer.cpp
    ${CMAKE_CURRENT_LIST_DIR}/transport/connection_loop.cpp
    ${CMAKE_CURRENT_LIST_DIR}/transport/request_head.cpp
    ${CMAKE_CURRENT_LIST_DIR}/transport/request_stream.cpp)
  target_include_directories(idem_http_payments_service PUBLIC ${CMAKE_CURRENT_LIST_DIR})
  target_link_libraries(idem_http_payments_service PUBLIC idem::sqlite idem::postgres
                        idem::redis PkgConfig::CPPHTTPLIB nlohmann_json::nlohmann_json
                        PRIVATE idem_warnings)
  if(TARGET idem::prometheus) # GET /metrics
    target_link_libraries(idem_http_payments_service PUBLIC idem::prometheus)
    target_compile_definitions(idem_http_payments_service PUBLIC IDEM_HTTP_PAYMENTS_PROMETHEUS)
  endif()
  add_executable(http_payments ${CMAKE_CURRENT_LIST_DIR}/main.cpp)
  target_link_libraries(http_payments PRIVATE idem_http_payments_service idem_warnings)
  set_target_properties(http_payments PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                                                 ${PROJECT_BINARY_DIR}/examples/http_payments)
elseif(NOT CPPHTTPLIB_FOUND)
  message(STATUS "idem: cpp-httplib not found (libcpp-httplib-dev): no http_payments example")
endif()
