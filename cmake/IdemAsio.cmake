# Detects the dependencies of the asynchronous guard idem_asio (idem::asio, include/idem/asio/) and
# sets IDEM_HAVE_ASIO, and IDEM_ASIO_MISSING to what to install when something is missing.
include("${CMAKE_CURRENT_LIST_DIR}/package/idem-asio-dependencies.cmake")
if(IDEM_ASIO_MISSING STREQUAL "")
  set(IDEM_HAVE_ASIO ON)
else()
  set(IDEM_HAVE_ASIO OFF)
endif()
