# FindXxhash: locate xxHash (xxhash.h and the xxhash library) and provide the IMPORTED target
# Xxhash::xxhash.
#
# idem's header-only core calls XXH3 through xxhash's stable API and links the library, so the
# hash is compiled once, in libxxhash, and never in a consumer's translation units (nor does any
# xxhash configuration macro such as XXH_INLINE_ALL reach them). Debian's libxxhash-dev ships no
# CMake config, only the header, the library and a pkg-config file; an xxHash installed with its
# own CMake config (xxHash::xxhash, e.g. vcpkg) is used as it is. This file is installed next to
# idemConfig.cmake so that consumers of an installed idem find xxhash the same way.
#
# Sets Xxhash_FOUND, Xxhash_INCLUDE_DIR, Xxhash_LIBRARY, Xxhash_VERSION.

find_package(xxHash CONFIG QUIET)
if(TARGET xxHash::xxhash)
  get_target_property(Xxhash_INCLUDE_DIR xxHash::xxhash INTERFACE_INCLUDE_DIRECTORIES)
  set(Xxhash_LIBRARY xxHash::xxhash)
  set(Xxhash_VERSION "${xxHash_VERSION}")
else()
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(PC_Xxhash QUIET libxxhash)
  endif()
  find_path(Xxhash_INCLUDE_DIR NAMES xxhash.h
            HINTS ${PC_Xxhash_INCLUDEDIR} ${PC_Xxhash_INCLUDE_DIRS})
  find_library(Xxhash_LIBRARY NAMES xxhash xxHash
               HINTS ${PC_Xxhash_LIBDIR} ${PC_Xxhash_LIBRARY_DIRS})
  mark_as_advanced(Xxhash_INCLUDE_DIR Xxhash_LIBRARY)
endif()

if(NOT TARGET xxHash::xxhash AND Xxhash_INCLUDE_DIR AND EXISTS "${Xxhash_INCLUDE_DIR}/xxhash.h")
  file(STRINGS "${Xxhash_INCLUDE_DIR}/xxhash.h" _xxhash_version_lines
       REGEX "^#define XXH_VERSION_(MAJOR|MINOR|RELEASE) +[0-9]+")
  foreach(_part MAJOR MINOR RELEASE)
    string(REGEX REPLACE ".*XXH_VERSION_${_part} +([0-9]+).*" "\\1" _xxhash_${_part}
                         "${_xxhash_version_lines}")
  endforeach()
  set(Xxhash_VERSION "${_xxhash_MAJOR}.${_xxhash_MINOR}.${_xxhash_RELEASE}")
  unset(_xxhash_version_lines)
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Xxhash
  REQUIRED_VARS Xxhash_LIBRARY Xxhash_INCLUDE_DIR
  VERSION_VAR Xxhash_VERSION
  REASON_FAILURE_MESSAGE "install xxHash, its header and library (Debian/Ubuntu: libxxhash-dev)")

if(Xxhash_FOUND AND NOT TARGET Xxhash::xxhash)
  if(TARGET xxHash::xxhash)
    add_library(Xxhash::xxhash INTERFACE IMPORTED)
    set_target_properties(Xxhash::xxhash PROPERTIES INTERFACE_LINK_LIBRARIES xxHash::xxhash)
  else()
    add_library(Xxhash::xxhash UNKNOWN IMPORTED)
    set_target_properties(Xxhash::xxhash PROPERTIES
      IMPORTED_LOCATION "${Xxhash_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${Xxhash_INCLUDE_DIR}")
  endif()
endif()
