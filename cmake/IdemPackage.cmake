# idem's install rules and package files (included when IDEM_INSTALL is on):
#
#   idem_package_core()
#     the header-only core: idem::idem in idemTargets.cmake with its headers, FindXxhash.cmake,
#     and idem.pc.
#   idem_package_component(<name> BUILT <bool> TARGETS <target>... OPTION <var>... NEEDS <text>
#                          [IN <folder>] [REQUIRES <component>...]
#                          [PC_FLAGS_FROM <imported target>...])
#     one component of find_package(idem COMPONENTS <name>). The config always knows it, and says
#     what to install (NEEDS) and which options build it (OPTION) when this build left it out.
#     REQUIRES: the components its targets link (asio_redis: asio and redis), whose dependencies
#     and targets the config loads with it.
#     When BUILT: its targets with their headers in idem-<name>-targets.cmake, the lookup of what
#     they link (<folder>/idem-<name>-dependencies.cmake, which sets IDEM_<NAME>_MISSING; none
#     needed if the component links only the core) and idem-<name>.pc (from
#     <folder>/idem-<name>.pc.in, if there is one; @IDEM_PC_IMPORTED_CFLAGS@ and
#     @IDEM_PC_IMPORTED_LIBS@ there are the flags of the PC_FLAGS_FROM targets, libraries that
#     ship no .pc file of their own). <folder>: cmake/package by default; a backend's own
#     src/<backend>/package (cmake/IdemBackends.cmake).
#   idem_package_config()
#     idemConfig.cmake and idemConfigVersion.cmake, after the last component.
include(CMakePackageConfigHelpers)

set(IDEM_CONFIG_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/idem")
set(IDEM_PKGCONFIG_DIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
set(_idem_package_in "${CMAKE_CURRENT_LIST_DIR}/package")

# The .pc files locate the installation from their own directory, so an installed tree may move
# (and `cmake --install --prefix` elsewhere than CMAKE_INSTALL_PREFIX works).
if(IS_ABSOLUTE "${IDEM_PKGCONFIG_DIR}")
  set(IDEM_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _idem_up "/p/${IDEM_PKGCONFIG_DIR}" "/p")
  string(REGEX REPLACE "/$" "" _idem_up "${_idem_up}")
  set(IDEM_PC_PREFIX "\${pcfiledir}/${_idem_up}")
endif()
foreach(_idem_dir INCLUDEDIR LIBDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_idem_dir}}")
    set(IDEM_PC_${_idem_dir} "${CMAKE_INSTALL_${_idem_dir}}")
  else()
    set(IDEM_PC_${_idem_dir} "\${prefix}/${CMAKE_INSTALL_${_idem_dir}}")
  endif()
endforeach()

# pkg-config flags for imported library targets that ship no .pc file (SQLiteCpp): -I, -L and -l,
# leaving out the compiler's own directories. Sets <cflags> and <libs>, each flag after a space.
function(_idem_pc_flags cflags libs)
  set(c "")
  set(l "")
  foreach(target IN LISTS ARGN)
    get_target_property(location ${target} LOCATION)
    get_filename_component(dir "${location}" DIRECTORY)
    get_filename_component(name "${location}" NAME_WE)
    string(REGEX REPLACE "^lib" "" name "${name}")
    if(NOT dir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
      list(APPEND l "-L${dir}")
    endif()
    list(APPEND l "-l${name}")
    get_target_property(links ${target} INTERFACE_LINK_LIBRARIES)
    foreach(link IN LISTS links) # plain library names; targets come with their own .pc files
      if(NOT TARGET ${link} AND link MATCHES "^[A-Za-z0-9_.+-]+$")
        list(APPEND l "-l${link}")
      endif()
    endforeach()
    get_target_property(includes ${target} INTERFACE_INCLUDE_DIRECTORIES)
    foreach(include IN LISTS includes)
      string(REGEX REPLACE "(.)/+$" "\\1" include "${include}")
      if(include AND NOT include IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
        list(APPEND c "-I${include}")
      endif()
    endforeach()
  endforeach()
  list(PREPEND c "") # each flag after a space, none when there is none
  list(PREPEND l "")
  list(JOIN c " " c)
  list(JOIN l " " l)
  set(${cflags} "${c}" PARENT_SCOPE)
  set(${libs} "${l}" PARENT_SCOPE)
endfunction()

function(idem_package_core)
  install(TARGETS idem EXPORT idemTargets FILE_SET HEADERS)
  install(EXPORT idemTargets NAMESPACE idem:: DESTINATION "${IDEM_CONFIG_DIR}")
  # The config finds xxhash again with it.
  install(FILES "${PROJECT_SOURCE_DIR}/cmake/FindXxhash.cmake" DESTINATION "${IDEM_CONFIG_DIR}")
  configure_file("${_idem_package_in}/idem.pc.in" "${PROJECT_BINARY_DIR}/pkgconfig/idem.pc" @ONLY)
  install(FILES "${PROJECT_BINARY_DIR}/pkgconfig/idem.pc" DESTINATION "${IDEM_PKGCONFIG_DIR}")
endfunction()

function(idem_package_component name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "BUILT;NEEDS;IN" "TARGETS;OPTION;REQUIRES;PC_FLAGS_FROM")
  if(NOT ARG_IN)
    set(ARG_IN "${_idem_package_in}")
  endif()
  if(NOT ARG_OPTION OR NOT ARG_NEEDS OR NOT ARG_TARGETS)
    message(FATAL_ERROR "idem_package_component(${name}): give TARGETS, OPTION and NEEDS")
  endif()
  set_property(GLOBAL APPEND PROPERTY IDEM_PACKAGE_COMPONENTS ${name})
  list(TRANSFORM ARG_OPTION APPEND "=ON")
  list(JOIN ARG_OPTION ", " options)
  set_property(GLOBAL APPEND_STRING PROPERTY IDEM_PACKAGE_COMPONENTS_TABLE
    "set(_idem_needs_${name} \"${ARG_NEEDS}\")\nset(_idem_option_${name} \"${options}\")\n\
set(_idem_requires_${name} ${ARG_REQUIRES})\n")
  if(NOT ARG_BUILT)
    return()
  endif()
  set_property(GLOBAL APPEND PROPERTY IDEM_PACKAGE_BUILT ${name})

  install(TARGETS ${ARG_TARGETS} EXPORT idem-${name}-targets
    ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
    LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}"
    RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}"
    FILE_SET HEADERS)
  install(EXPORT idem-${name}-targets NAMESPACE idem:: DESTINATION "${IDEM_CONFIG_DIR}")
  if(EXISTS "${ARG_IN}/idem-${name}-dependencies.cmake")
    # Configured: an @VARIABLE@ there records what this build found (libpqxx's version).
    configure_file("${ARG_IN}/idem-${name}-dependencies.cmake"
                   "${PROJECT_BINARY_DIR}/package/idem-${name}-dependencies.cmake" @ONLY)
    install(FILES "${PROJECT_BINARY_DIR}/package/idem-${name}-dependencies.cmake"
            DESTINATION "${IDEM_CONFIG_DIR}")
  endif()

  if(EXISTS "${ARG_IN}/idem-${name}.pc.in")
    _idem_pc_flags(IDEM_PC_IMPORTED_CFLAGS IDEM_PC_IMPORTED_LIBS ${ARG_PC_FLAGS_FROM})
    configure_file("${ARG_IN}/idem-${name}.pc.in"
                   "${PROJECT_BINARY_DIR}/pkgconfig/idem-${name}.pc" @ONLY)
    install(FILES "${PROJECT_BINARY_DIR}/pkgconfig/idem-${name}.pc"
            DESTINATION "${IDEM_PKGCONFIG_DIR}")
  endif()
endfunction()

function(idem_package_config)
  get_property(components GLOBAL PROPERTY IDEM_PACKAGE_COMPONENTS)
  get_property(built GLOBAL PROPERTY IDEM_PACKAGE_BUILT)
  get_property(table GLOBAL PROPERTY IDEM_PACKAGE_COMPONENTS_TABLE)
  set(IDEM_CONFIG_COMPONENTS
      "set(_idem_components ${components})\nset(_idem_built ${built})\n${table}")
  configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/idemConfig.cmake.in"
    "${PROJECT_BINARY_DIR}/idemConfig.cmake" INSTALL_DESTINATION "${IDEM_CONFIG_DIR}")
  # While idem is 0.x a minor release may break its API: 0.1 accepts 0.1.z only. From 1.0 on, the
  # major version. Not ARCH_INDEPENDENT: the adapters are compiled.
  if(PROJECT_VERSION_MAJOR EQUAL 0)
    set(compatibility SameMinorVersion)
  else()
    set(compatibility SameMajorVersion)
  endif()
  write_basic_package_version_file("${PROJECT_BINARY_DIR}/idemConfigVersion.cmake"
    COMPATIBILITY ${compatibility})
  install(FILES "${PROJECT_BINARY_DIR}/idemConfig.cmake"
                "${PROJECT_BINARY_DIR}/idemConfigVersion.cmake"
          DESTINATION "${IDEM_CONFIG_DIR}")
endfunction()
