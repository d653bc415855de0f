# The asynchronous payments server (http_payments_async): Boost.Beast with coroutines on
# idem::AsyncGuard over AsyncPostgresStore, defined once: examples/ and the end-to-end tests in
# tests/http/ both include this file. Sets IDEM_HTTP_PAYMENTS_ASYNC to ON (in the including
# scope) when it can be built: with idem::asio_postgres (Boost.Asio and the PostgreSQL adapter)
# and nlohmann-json. It shares the blocking example's transport-neutral pieces (command line,
# request checks, problem bodies, canned answers, the rules it reads requests by) from
# examples/http_payments.
if(TARGET http_payments_async)
  set(IDEM_HTTP_PAYMENTS_ASYNC ON)
  return()
endif()

set(IDEM_HTTP_PAYMENTS_ASYNC OFF)
find_package(nlohmann_json CONFIG QUIET)
set(_why "")
if(NOT TARGET idem::asio_postgres)
  set(_why "no Boost.Asio (IDEM_WITH_ASIO) or no PostgreSQL adapter")
elseif(NOT nlohmann_json_FOUND)
  set(_why "nlohmann-json not found")
endif()
if(_why)
  # Said once, though both examples/ and tests/http include this file.
  get_property(_said GLOBAL PROPERTY IDEM_HTTP_PAYMENTS_ASYNC_SKIPPED)
  if(NOT _said)
    message(STATUS "idem: ${_why}: no http_payments_async example")
    set_property(GLOBAL PROPERTY IDEM_HTTP_PAYMENTS_ASYNC_SKIPPED ON)
  endif()
  unset(_why)
  unset(_said)
  return()
endif()
unset(_why)

set(IDEM_HTTP_PAYMENTS_ASYNC ON)
set(_blocking ${CMAKE_CURRENT_LIST_DIR}/../http_payments)
# Beast is instantiated in http_server.cpp alone and the guard in payments_routes.cpp alone.
add_executable(http_payments_async
  ${CMAKE_CURRENT_LIST_DIR}/main.cpp
  ${CMAKE_CURRENT_LIST_DIR}/http_server.cpp
  ${CMAKE_CURRENT_LIST_DIR}/payments_routes.cpp
  ${_blocking}/command_line.cpp
  ${_blocking}/transport/canned_answer.cpp
  ${_blocking}/transport/http_text.cpp
  ${_blocking}/transport/request_rules.cpp)
target_include_directories(http_payments_async PRIVATE ${CMAKE_CURRENT_LIST_DIR} ${_blocking})
target_link_libraries(http_payments_async PRIVATE idem::asio_postgres
                      nlohmann_json::nlohmann_json idem_warnings)
# GCC 12 takes Asio's recycling allocator of coroutine frames for a mismatched new/delete.
target_compile_options(http_payments_async PRIVATE
                       $<$<CXX_COMPILER_ID:GNU>:-Wno-mismatched-new-delete>)
set_target_properties(http_payments_async PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                                                     ${PROJECT_BINARY_DIR}/examples/http_payments_async)
unset(_blocking)
