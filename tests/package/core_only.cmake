# cmake -DSOURCE_DIR=<idem> -DWORK_DIR=<dir> -DPREFIX=<dir> -DGENERATOR=<generator> -DCXX=<compiler>
#       [-DCONFIG=<build type>] -P core_only.cmake
# Configures and installs idem with every adapter, the conformance kit, the JSON codec and the
# observers off, then checks the installation: no file of theirs (headers, libraries, CMake
# targets, .pc files) is there, and the installed headers, all included in one file, compile:
# none of them needs a header left out.
cmake_policy(VERSION 3.25)
file(REMOVE_RECURSE "${WORK_DIR}")
set(build "${WORK_DIR}/build")
string(TOUPPER "${CONFIG}" config) # -O0: like the consumer builds (CMakeLists.txt), compile fast
execute_process(
  COMMAND "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${build}" -G "${GENERATOR}"
          "-DCMAKE_CXX_COMPILER=${CXX}" "-DCMAKE_BUILD_TYPE=${CONFIG}" "-DCMAKE_CXX_FLAGS_${config}=-O0"
          -DIDEM_WITH_SQLITE=OFF -DIDEM_WITH_POSTGRES=OFF -DIDEM_WITH_REDIS=OFF -DIDEM_WITH_GRPC=OFF
          -DIDEM_WITH_TESTING=OFF -DIDEM_WITH_JSON=OFF -DIDEM_WITH_PROMETHEUS=OFF
          -DIDEM_WITH_SPDLOG=OFF -DIDEM_WITH_ASIO=OFF
          -DIDEM_BUILD_TESTS=OFF -DIDEM_BUILD_BENCH=OFF -DIDEM_BUILD_EXAMPLES=OFF
          -DIDEM_BUILD_TOOLS=OFF
  COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${build}" COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${build}" --prefix "${PREFIX}"
                COMMAND_ERROR_IS_FATAL ANY)

file(GLOB_RECURSE installed RELATIVE "${PREFIX}" "${PREFIX}/*")
set(adapter_files "")
foreach(file IN LISTS installed)
  if(file MATCHES "sqlite|postgres|redis|/sql/|testing|json|grpc|protobuf|prometheus|spdlog|asio")
    list(APPEND adapter_files "${file}")
  endif()
endforeach()
if(adapter_files)
  message(FATAL_ERROR "an idem built without components installed their files: "
                      "${adapter_files}")
endif()
if(NOT "lib/cmake/idem/idemConfig.cmake" IN_LIST installed
   AND NOT "lib64/cmake/idem/idemConfig.cmake" IN_LIST installed)
  message(FATAL_ERROR "no idemConfig.cmake among the installed files: ${installed}")
endif()

set(all "${WORK_DIR}/all_headers.cpp")
file(WRITE "${all}" "// Every header of a core-only idem.\n")
list(FILTER installed INCLUDE REGEX "^include/.*\\.hpp$")
foreach(header IN LISTS installed)
  string(REGEX REPLACE "^include/" "" header "${header}")
  file(APPEND "${all}" "#include <${header}>\n")
endforeach()
file(APPEND "${all}" "int main() { return 0; }\n")
execute_process(COMMAND "${CXX}" -std=c++20 -fsyntax-only "-I${PREFIX}/include" "${all}"
                COMMAND_ERROR_IS_FATAL ANY)
list(LENGTH installed count)
message(STATUS "core-only install: no adapter or kit file; its ${count} headers compile")
