# The http_payments server (Boost.Beast, cpp-httplib from libcpp-httplib-dev via pkg-config,
# nlohmann-json), defined once: examples/ and the end-to-end tests in tests/http/ both include
# this file.
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
if(NOT TARGET Boost::headers) # Boost.Beast parses the requests
  find_package(Boost 1.80 QUIET CONFIG)
endif()

if(CPPHTTPLIB_FOUND AND nlohmann_json_FOUND AND TARGET Boost::headers AND IDEM_WITH_SQLITE
   AND IDEM_WITH_POSTGRES AND IDEM_WITH_REDIS)
  set(IDEM_HTTP_PAYMENTS ON)
  # The service, its command line and its HTTP transport (transport/: requests parsed by
  # Boost.Beast as they come in, threads that answer only whole requests, whole-request
  # deadlines, body and connection limits; cpp-httplib's Request and Response for the routes).
  add_library(idem_http_payments_service STATIC
    ${CMAKE_CURRENT_LIST_DIR}/command_line.cpp
    ${CMAKE_CURRENT_LIST_DIR}/transport/bounded_server.cpp
    ${CMAKE_CURRENT_LIST_DIR}/transport/canned_answer.cpp
    ${CMAKE_CURRENT_LIST_DIR}/transport/connection_loop.cpp
    ${CMAKE_CURRENT_LIST_DIR}/transport/http_text.cpp
    ${CMAKE_CURRENT_LIST_DIR}/transport/request_reader.cpp
    ${CMAKE_CURRENT_LIST_DIR}/transport/request_rules.cpp
    ${CMAKE_CURRENT_LIST_DIR}/transport/router.cpp)
  target_include_directories(idem_http_payments_service PUBLIC ${CMAKE_CURRENT_LIST_DIR})
  target_link_libraries(idem_http_payments_service PUBLIC idem::sqlite idem::postgres
                        idem::redis PkgConfig::CPPHTTPLIB nlohmann_json::nlohmann_json
                        Boost::headers PRIVATE idem_warnings)
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
elseif(NOT TARGET Boost::headers)
  message(STATUS "idem: Boost 1.80 or later not found (libboost1.81-dev): no http_payments example")
endif()
