# FindXxhash: locate xxhash.h and provide the INTERFACE IMPORTED target Xxhash::xxhash.
#
# Debian's libxxhash-dev ships no CMake config, only the header, a library and a pkg-config file.
# idem includes xxhash with XXH_INLINE_ALL, so the header is all it needs: the target carries the
# include directory and nothing to link. This file is installed next to idemConfig.cmake so that
# consumers of an installed idem find xxhash the same way.
#
# Sets Xxhash_FOUND, Xxhash_INCLUDE_DIR, Xxhash_VERSION.

find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_Xxhash QUIET libxxhash)
endif()

find_path(Xxhash_INCLUDE_DIR NAMES xxhash.h HINTS ${PC_Xxhash_INCLUDEDIR} ${PC_Xxhash_INCLUDE_DIRS})

if(Xxhash_INCLUDE_DIR AND EXISTS "${Xxhash_INCLUDE_DIR}/xxhash.h")
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
  REQUIRED_VARS Xxhash_INCLUDE_DIR
  VERSION_VAR Xxhash_VERSION
  REASON_FAILURE_MESSAGE "install xxhash (Debian/Ubuntu: libxxhash-dev)")
mark_as_advanced(Xxhash_INCLUDE_DIR)

if(Xxhash_FOUND AND NOT TARGET Xxhash::xxhash)
  add_library(Xxhash::xxhash INTERFACE IMPORTED)
  set_target_properties(Xxhash::xxhash PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${Xxhash_INCLUDE_DIR}")
endif()
