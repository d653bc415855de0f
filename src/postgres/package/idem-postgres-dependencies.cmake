# What idem::postgres links: libpq (every statement the store sends), libpqxx (the handler's
# transaction) and OpenSSL (libssl, libcrypto: a second look at a server certificate libpq refused, to say
# why), through pkg-config (the imported target PkgConfig::IDEM_PQXX; Debian ships no
# CMake config for libpqxx).
# Read by idem's own build (idem_backends(), cmake/IdemBackends.cmake) and, installed, by
# idemConfig.cmake when a consumer asks for the postgres component. Sets IDEM_POSTGRES_MISSING to
# what to install, or to "" when everything was found, IDEM_POSTGRES_NEEDS to what the component
# needs, and IDEM_PQXX_VERSION to the libpqxx version found ("" when none).
#
# The adapter builds against libpqxx 6.4, and 7.7 or later in the 7 series (tested: 6.4 and
# 7.10); 8.x is accepted with a warning, untested (docs/sql.md). An installed idem::postgres
# was compiled against one libpqxx major version and needs that one.
set(IDEM_POSTGRES_NEEDS "libpqxx and libssl (Debian/Ubuntu: libpqxx-dev, libssl-dev)")
set(IDEM_POSTGRES_MISSING "")
set(IDEM_PQXX_VERSION "")
# No semicolon in these texts: idemConfig.cmake passes them on as lists.
set(_idem_pqxx_needed "libpqxx 6.4, or 7.7 or later,")
find_package(PkgConfig QUIET)
if(NOT PkgConfig_FOUND)
  set(IDEM_POSTGRES_MISSING "pkg-config, which finds libpqxx and libpq (Debian/Ubuntu: pkg-config)")
else()
  pkg_check_modules(IDEM_PQXX QUIET IMPORTED_TARGET libpqxx libpq libssl libcrypto)
  if(NOT TARGET PkgConfig::IDEM_PQXX)
    set(IDEM_POSTGRES_MISSING
        "${_idem_pqxx_needed} libpq and libssl (Debian/Ubuntu: libpqxx-dev, libpq-dev, libssl-dev)")
  else()
    set(IDEM_PQXX_VERSION "${IDEM_PQXX_libpqxx_VERSION}")
    # The libpqxx this file was installed with (an idem::postgres built against it); the
    # placeholder stays as it is in idem's own build.
    set(_idem_pqxx_built "@IDEM_PQXX_VERSION@")
    string(REGEX MATCH "^[0-9]+" _idem_pqxx_major "${IDEM_PQXX_VERSION}")
    string(REGEX MATCH "^[0-9]+" _idem_pqxx_built_major "${_idem_pqxx_built}")
    if(IDEM_PQXX_VERSION VERSION_LESS 6.4
       OR (IDEM_PQXX_VERSION VERSION_GREATER_EQUAL 7 AND IDEM_PQXX_VERSION VERSION_LESS 7.7)
       OR IDEM_PQXX_VERSION VERSION_GREATER_EQUAL 9)
      string(CONCAT IDEM_POSTGRES_MISSING "${_idem_pqxx_needed} not libpqxx ${IDEM_PQXX_VERSION} "
             "(Debian/Ubuntu: libpqxx-dev, libpq-dev)")
    elseif(_idem_pqxx_built_major AND NOT _idem_pqxx_major STREQUAL _idem_pqxx_built_major)
      string(CONCAT IDEM_POSTGRES_MISSING
             "libpqxx ${_idem_pqxx_built_major}.x, the major version this idem::postgres was "
             "built against (${_idem_pqxx_built}), not libpqxx ${IDEM_PQXX_VERSION}")
    elseif(_idem_pqxx_major EQUAL 8)
      message(WARNING "idem: libpqxx ${IDEM_PQXX_VERSION} found; the PostgreSQL adapter is written "
                      "to libpqxx 8's API but untested on it (tested: 6.4 and 7.10, docs/sql.md)")
    endif()
  endif()
endif()
