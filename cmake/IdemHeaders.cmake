# Which public header ships with which library. An adapter's headers are installed with that
# adapter only, and the conformance kit's (include/idem/testing, on GoogleTest) with idem::testing
# only, so an idem built without them installs none of them; every other header under include/idem
# is the header-only core's (IDEM_CORE_HEADERS). Absolute paths, for FILE_SETs.
set(_idem_include "${PROJECT_SOURCE_DIR}/include")

set(IDEM_SQL_HEADERS # the SQL layer both SQL adapters share
  idem/detail/sql_entities.hpp
  idem/stores/sql_store.hpp)
set(IDEM_SQLITE_HEADERS
  idem/admin/sqlite_admin.hpp
  idem/stores/sqlite_store.hpp
  idem/stores/sqlite_transaction.hpp)
set(IDEM_POSTGRES_HEADERS
  idem/admin/postgres_admin.hpp
  idem/stores/postgres_store.hpp
  idem/stores/postgres_transaction.hpp)
set(IDEM_PROMETHEUS_HEADERS # the optional observer components: metrics, on prometheus-cpp
  idem/prometheus.hpp)
set(IDEM_SPDLOG_HEADERS # and logs, on spdlog
  idem/spdlog.hpp)
set(IDEM_REDIS_HEADERS
  idem/admin/redis_admin.hpp
  idem/redis/client.hpp
  idem/redis/stream_consumer.hpp
  idem/stores/redis_store.hpp
  idem/stores/redis_token_store.hpp
  idem/stores/request_id_cache.hpp)
set(IDEM_GRPC_HEADERS
  idem/codecs/protobuf.hpp
  idem/grpc.hpp)

set(IDEM_JSON_HEADERS # the JSON codec, on nlohmann-json
  idem/codecs/json.hpp)

# The asynchronous guard, on Boost.Asio (idem::asio), AsyncRedisStore (idem::asio_redis) and
# AsyncPostgresStore (idem::asio_postgres).
set(IDEM_ASIO_REDIS_HEADERS
  idem/asio/redis_store.hpp)
set(IDEM_ASIO_POSTGRES_HEADERS
  idem/asio/postgres_store.hpp)
file(GLOB_RECURSE IDEM_ASIO_HEADERS CONFIGURE_DEPENDS RELATIVE "${_idem_include}"
     "${_idem_include}/idem/asio/*.hpp")
list(REMOVE_ITEM IDEM_ASIO_HEADERS ${IDEM_ASIO_REDIS_HEADERS} ${IDEM_ASIO_POSTGRES_HEADERS})
file(GLOB_RECURSE IDEM_TESTING_HEADERS CONFIGURE_DEPENDS RELATIVE "${_idem_include}"
     "${_idem_include}/idem/testing/*.hpp")
# The kit's asynchronous face and blocking adapter: shipped with the kit, and usable where
# idem::asio is linked too (Boost.Asio).
set(IDEM_TESTING_ASIO_HEADERS
  idem/testing/async_face.hpp
  idem/testing/blocking_store.hpp)
list(REMOVE_ITEM IDEM_TESTING_HEADERS ${IDEM_TESTING_ASIO_HEADERS})

file(GLOB_RECURSE IDEM_CORE_HEADERS CONFIGURE_DEPENDS RELATIVE "${_idem_include}"
     "${_idem_include}/idem/*.hpp")
foreach(_idem_list SQL SQLITE POSTGRES REDIS GRPC ASIO ASIO_REDIS ASIO_POSTGRES TESTING TESTING_ASIO JSON
                  PROMETHEUS SPDLOG)
  foreach(_idem_header IN LISTS IDEM_${_idem_list}_HEADERS)
    if(NOT _idem_header IN_LIST IDEM_CORE_HEADERS)
      message(FATAL_ERROR "cmake/IdemHeaders.cmake: IDEM_${_idem_list}_HEADERS names "
                          "${_idem_header}, which is not under include/")
    endif()
  endforeach()
  list(REMOVE_ITEM IDEM_CORE_HEADERS ${IDEM_${_idem_list}_HEADERS})
  list(TRANSFORM IDEM_${_idem_list}_HEADERS PREPEND "${_idem_include}/")
endforeach()
list(TRANSFORM IDEM_CORE_HEADERS PREPEND "${_idem_include}/")
unset(_idem_list)
unset(_idem_header)

# idem_target_headers(<target> <INTERFACE|PUBLIC> <header>...): the headers <target> installs.
function(idem_target_headers target scope)
  target_sources(${target} ${scope} FILE_SET HEADERS BASE_DIRS "${_idem_include}" FILES ${ARGN})
endfunction()
