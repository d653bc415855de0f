# Detects the dependencies of the gRPC integration idem_grpc (idem::grpc, src/grpc/) and sets
# IDEM_HAVE_GRPC, and IDEM_GRPC_MISSING to what to install when something is missing. What the
# library links (grpc++, protobuf) is looked up in cmake/package/idem-grpc-dependencies.cmake,
# which an installed idem's config reads too.
#
# idem's own example, tests and benchmark also generate code from a .proto: they need protoc and
# grpc_cpp_plugin (IDEM_GRPC_CODEGEN), which the library itself does not.
include("${CMAKE_CURRENT_LIST_DIR}/package/idem-grpc-dependencies.cmake")
if(IDEM_GRPC_MISSING STREQUAL "")
  set(IDEM_HAVE_GRPC ON)
else()
  set(IDEM_HAVE_GRPC OFF)
  message(STATUS "idem: no gRPC integration without ${IDEM_GRPC_MISSING}")
endif()
