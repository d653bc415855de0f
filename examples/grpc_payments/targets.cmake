# The gRPC payments example's targets, defined once: examples/, tests/grpc/ and bench/ include this
# file. Sets IDEM_GRPC_PAYMENTS to ON (in the including scope) when the generated code can be built (idem::grpc,
# protoc and grpc_cpp_plugin); the server needs the SQLite, PostgreSQL and Redis adapters too.
#
#   idem_grpc_payments_proto   the code generated from payments.proto, compiled once (a static
#                              library the example, the tests and the benchmark share)
#   grpc_payments_server       the server: SQLite by default, --pg URI or --redis URI
#   grpc_payments_client       a client that retries a charge with the same key
if(TARGET idem_grpc_payments_proto)
  set(IDEM_GRPC_PAYMENTS ON)
  return()
endif()

set(IDEM_GRPC_PAYMENTS OFF)
if(NOT TARGET idem_grpc)
  return()
endif()
find_program(IDEM_PROTOC protoc)
find_program(IDEM_GRPC_CPP_PLUGIN grpc_cpp_plugin)
if(NOT IDEM_PROTOC OR NOT IDEM_GRPC_CPP_PLUGIN)
  message(STATUS "idem: protoc or grpc_cpp_plugin not found (protobuf-compiler, "
                 "protobuf-compiler-grpc): no gRPC example, tests or benchmark")
  return()
endif()
set(IDEM_GRPC_PAYMENTS ON)

set(_idem_gp_dir "${CMAKE_CURRENT_LIST_DIR}")
set(_idem_gp_out "${PROJECT_BINARY_DIR}/examples/grpc_payments/generated")
set(_idem_gp_files "${_idem_gp_out}/payments.pb.cc" "${_idem_gp_out}/payments.pb.h"
                   "${_idem_gp_out}/payments.grpc.pb.cc" "${_idem_gp_out}/payments.grpc.pb.h")
add_custom_command(
  OUTPUT ${_idem_gp_files}
  COMMAND "${CMAKE_COMMAND}" -E make_directory "${_idem_gp_out}"
  COMMAND "${IDEM_PROTOC}" "--proto_path=${_idem_gp_dir}" "--cpp_out=${_idem_gp_out}"
          "--grpc_out=${_idem_gp_out}" "--plugin=protoc-gen-grpc=${IDEM_GRPC_CPP_PLUGIN}"
          "${_idem_gp_dir}/payments.proto"
  DEPENDS "${_idem_gp_dir}/payments.proto"
  COMMENT "Generating the gRPC payments example's code from payments.proto"
  VERBATIM)
add_library(idem_grpc_payments_proto STATIC ${_idem_gp_files})
# Generated code: no warnings of idem's own, and its headers as system headers.
target_include_directories(idem_grpc_payments_proto SYSTEM PUBLIC "${_idem_gp_out}")
target_link_libraries(idem_grpc_payments_proto PUBLIC PkgConfig::IDEM_GRPC)
# The service (payments_service.hpp, header-only) is usable with any store from here on.
target_include_directories(idem_grpc_payments_proto PUBLIC "${_idem_gp_dir}")
target_link_libraries(idem_grpc_payments_proto PUBLIC idem::grpc)

if(NOT (IDEM_WITH_SQLITE AND IDEM_WITH_POSTGRES AND IDEM_WITH_REDIS))
  message(STATUS "idem: the gRPC payments server needs the SQLite, PostgreSQL and Redis adapters")
  return()
endif()

add_executable(grpc_payments_server "${_idem_gp_dir}/server.cpp")
target_link_libraries(grpc_payments_server PRIVATE idem_grpc_payments_proto idem::sqlite
                      idem::postgres idem::redis idem_warnings)
add_executable(grpc_payments_client "${_idem_gp_dir}/client.cpp")
target_link_libraries(grpc_payments_client PRIVATE idem_grpc_payments_proto idem::grpc
                      idem_warnings)
set_target_properties(grpc_payments_server grpc_payments_client PROPERTIES
                      RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/examples/grpc_payments)
