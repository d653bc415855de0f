# Reads idem's version from include/idem/version.hpp, its one source: project(), the package
# version file and the pkg-config files all take it from there. Sets IDEM_VERSION_FROM_HEADER.
file(STRINGS "${CMAKE_CURRENT_LIST_DIR}/../include/idem/version.hpp" _idem_version_lines
     REGEX "^#define IDEM_VERSION_(MAJOR|MINOR|PATCH) +[0-9]+ *$")
set(IDEM_VERSION_FROM_HEADER "")
foreach(_idem_part MAJOR MINOR PATCH)
  if(NOT _idem_version_lines MATCHES "IDEM_VERSION_${_idem_part} +([0-9]+)")
    message(FATAL_ERROR "include/idem/version.hpp: no #define IDEM_VERSION_${_idem_part} <number>")
  endif()
  list(APPEND IDEM_VERSION_FROM_HEADER "${CMAKE_MATCH_1}")
endforeach()
list(JOIN IDEM_VERSION_FROM_HEADER "." IDEM_VERSION_FROM_HEADER)
unset(_idem_version_lines)
unset(_idem_part)
