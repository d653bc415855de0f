# idem_backends(<name>...): the compiled backends, each a folder that holds all of it
# (docs/architecture.md, "Adding a backend"):
#
#   include/idem/<name>/                   its public headers
#   src/<name>/CMakeLists.txt              builds idem_<name> (idem::<name>) and, with idem::asio,
#                                          idem_asio_<name> (idem::asio_<name>) if it has an
#                                          asynchronous face
#   src/<name>/package/idem-<name>-dependencies.cmake
#                                          finds what it links; sets IDEM_<NAME>_MISSING (what to
#                                          install, "" when all is there), IDEM_<NAME>_NEEDS and
#                                          optionally IDEM_<NAME>_PC_FLAGS_FROM; installed beside
#                                          idemConfig.cmake, which reads it again
#   src/<name>/package/idem-<name>.pc.in   its pkg-config file (idem-asio_<name>.pc.in likewise)
#
# For each: the option IDEM_WITH_<NAME> (top level: ON when its dependencies are found; as a
# sub-project: OFF, and its dependencies are not even looked up), the folder's build, its package
# components (<name> and asio_<name>), its header unit for clang-tidy, and the global property
# IDEM_BACKENDS that the tools read (tools/idem opens any built backend's admin from a URI).
include("${CMAKE_CURRENT_LIST_DIR}/IdemFmt.cmake") # every compiled backend builds with fmt

macro(idem_backends)
  foreach(_idem_backend IN ITEMS ${ARGN})
    _idem_backend(${_idem_backend})
  endforeach()
  unset(_idem_backend)
endmacro()

# A function: what the dependency lookup sets (imported targets aside) stays in its scope.
function(_idem_backend name)
  string(TOUPPER "${name}" upper)
  set(dir "${PROJECT_SOURCE_DIR}/src/${name}")
  set(dependencies "${dir}/package/idem-${name}-dependencies.cmake")
  if(NOT EXISTS "${dir}/CMakeLists.txt" OR NOT EXISTS "${dependencies}")
    message(FATAL_ERROR "idem_backends(${name}): src/${name}/ needs CMakeLists.txt and "
                        "package/idem-${name}-dependencies.cmake (docs/architecture.md)")
  endif()
  set(default OFF)
  if(PROJECT_IS_TOP_LEVEL OR IDEM_WITH_${upper})
    include("${dependencies}") # sets IDEM_<NAME>_MISSING, IDEM_<NAME>_NEEDS
    if(IDEM_${upper}_MISSING STREQUAL "")
      set(IDEM_${upper}_MISSING "${IDEM_FMT_MISSING}")
    endif()
    if(PROJECT_IS_TOP_LEVEL AND IDEM_${upper}_MISSING STREQUAL "")
      set(default ON)
    elseif(PROJECT_IS_TOP_LEVEL)
      message(STATUS "idem: no ${name} backend without ${IDEM_${upper}_MISSING}")
    endif()
  else()
    set(IDEM_${upper}_MISSING "")
    if(IDEM_INSTALL) # a sub-project that installs: its config names what the backend needs
      include("${dependencies}")
    endif()
  endif()
  option(IDEM_WITH_${upper} "Build idem's ${name} backend (src/${name}/)" ${default})
  if(IDEM_WITH_${upper} AND NOT IDEM_${upper}_MISSING STREQUAL "")
    message(FATAL_ERROR "IDEM_WITH_${upper} is ON but it cannot be built: install "
                        "${IDEM_${upper}_MISSING}, or set IDEM_WITH_${upper} to OFF")
  endif()
  set_property(GLOBAL APPEND PROPERTY IDEM_BACKENDS_KNOWN ${name})
  if(IDEM_WITH_${upper})
    add_subdirectory("${dir}" "${PROJECT_BINARY_DIR}/src/${name}")
    set_property(GLOBAL APPEND PROPERTY IDEM_BACKENDS ${name})
  endif()

  if(IDEM_INSTALL)
    idem_package_component(${name} BUILT ${IDEM_WITH_${upper}} TARGETS idem_${name}
      IN "${dir}/package" OPTION IDEM_WITH_${upper} NEEDS "${IDEM_${upper}_NEEDS}"
      PC_FLAGS_FROM ${IDEM_${upper}_PC_FLAGS_FROM})
    if(EXISTS "${dir}/package/idem-asio_${name}.pc.in") # it has an asynchronous face
      set(async_built OFF)
      if(TARGET idem_asio_${name})
        set(async_built ON)
      endif()
      idem_package_component(asio_${name} BUILT ${async_built} TARGETS idem_asio_${name}
        IN "${dir}/package" REQUIRES asio ${name} OPTION IDEM_WITH_ASIO IDEM_WITH_${upper}
        NEEDS "${IDEM_ASIO_NEEDS} and ${IDEM_${upper}_NEEDS}")
    endif()
  endif()
endfunction()

# idem_backends_built(<variable>): the backends this build has, in the order they were given.
function(idem_backends_built variable)
  get_property(built GLOBAL PROPERTY IDEM_BACKENDS)
  set(${variable} ${built} PARENT_SCOPE)
endfunction()
