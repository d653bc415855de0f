# cmake -DPKG_CONFIG=<pkg-config> -DPKG_CONFIG_DIR=<installed .pc files> -DMODULE=<module>
#       -DSOURCE=<program.cpp> -DCXX=<compiler> -DWORK_DIR=<dir> [-DLAUNCHER=<ccache>]
#       -P pkg_config.cmake
# Compiles and links SOURCE with a plain compiler call and nothing but the flags of
# `pkg-config --cflags --libs MODULE` (the installed .pc files first on PKG_CONFIG_PATH), then
# runs it. LAUNCHER: the build's compiler launcher, which the call goes through (it changes no
# flag, and a rerun of the suite does not compile an unchanged program again).
cmake_policy(VERSION 3.25)
set(ENV{PKG_CONFIG_PATH} "${PKG_CONFIG_DIR}")
execute_process(COMMAND "${PKG_CONFIG}" --cflags --libs "${MODULE}"
                OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND "${PKG_CONFIG}" --variable=pcfiledir "${MODULE}"
                OUTPUT_VARIABLE pcfiledir OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT pcfiledir STREQUAL PKG_CONFIG_DIR)
  message(FATAL_ERROR "pkg-config found ${MODULE} in ${pcfiledir}, not in ${PKG_CONFIG_DIR}")
endif()
message(STATUS "pkg-config --cflags --libs ${MODULE}: ${flags}")
separate_arguments(flags UNIX_COMMAND "${flags}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(program "${WORK_DIR}/${MODULE}")
execute_process(COMMAND ${LAUNCHER} "${CXX}" -std=c++20 "${SOURCE}" ${flags} -o "${program}"
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND "${program}" COMMAND_ERROR_IS_FATAL ANY)
