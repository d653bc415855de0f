# What idem::spdlog (idem/spdlog.hpp) links: spdlog, from its own CMake config. Read by idem's own
# build (cmake/IdemSpdlog.cmake) and, installed, by idemConfig.cmake when a consumer asks for the
# spdlog component. Sets IDEM_SPDLOG_MISSING to what to install, or to "" when it was found.
set(IDEM_SPDLOG_MISSING "")
if(NOT TARGET spdlog::spdlog)
  find_package(spdlog CONFIG QUIET)
endif()
if(NOT TARGET spdlog::spdlog)
  set(IDEM_SPDLOG_MISSING "spdlog (Debian/Ubuntu: libspdlog-dev)")
endif()
