# What idem::grpc links: gRPC's C++ library and protobuf, through pkg-config (the imported target
# PkgConfig::IDEM_GRPC; Debian's gRPC ships .pc files, and its CMake config is not in every
# release). Read by idem's own build (cmake/IdemGrpc.cmake) and, installed, by idemConfig.cmake when
# a consumer asks for the grpc component. Sets IDEM_GRPC_MISSING to what to install, or to "" when
# everything was found.
set(IDEM_GRPC_MISSING "")
find_package(PkgConfig QUIET)
if(NOT PkgConfig_FOUND)
  set(IDEM_GRPC_MISSING "pkg-config, which finds grpc++ and protobuf (Debian/Ubuntu: pkg-config)")
else()
  pkg_check_modules(IDEM_GRPC QUIET IMPORTED_TARGET grpc++ protobuf)
  if(NOT TARGET PkgConfig::IDEM_GRPC)
    set(IDEM_GRPC_MISSING "gRPC C++ and protobuf (Debian/Ubuntu: libgrpc++-dev, libprotobuf-dev)")
  endif()
endif()
