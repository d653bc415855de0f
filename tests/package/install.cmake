# cmake -DBUILD_DIR=... -DPREFIX=... [-DCONFIG=...] -P install.cmake
# Installs a fresh copy of the build tree: the prefix is wiped first so a header deleted from the
# source tree cannot linger there and hide a broken install.
cmake_policy(VERSION 3.25)
file(REMOVE_RECURSE "${PREFIX}")
set(config_args "")
if(CONFIG)
  set(config_args --config "${CONFIG}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}" ${config_args}
                COMMAND_ERROR_IS_FATAL ANY)
