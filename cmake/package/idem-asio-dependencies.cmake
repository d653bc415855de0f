# What idem::asio needs: Boost.Asio (headers only, Boost 1.80 or later: awaitable cancellation
# and as_tuple). Read by idem's own build (cmake/IdemAsio.cmake). Sets IDEM_ASIO_MISSING to what to
# install, or to "" when everything was found.
set(IDEM_ASIO_NEEDS "Boost 1.80 or later (Debian/Ubuntu: libboost1.81-dev)")
set(IDEM_ASIO_MISSING "")
find_package(Boost 1.80 QUIET CONFIG)
if(NOT TARGET Boost::headers)
  set(IDEM_ASIO_MISSING "Boost 1.80 or later (Debian/Ubuntu: libboost1.81-dev)")
endif()
