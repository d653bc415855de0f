# cmake -DVIEW=<dir> -DPREFIX=<installed idem> -DXXHASH_INCLUDE_DIR=<dir> -DXXHASH_LIBRARY=<file>
#       -P view.cmake
# A machine view for the package tests: a find root holding xxhash (the core's one dependency) and
# the installed idem, at /idem, and nothing of SQLite, SQLiteCpp, libpqxx or hiredis. A consumer
# configured with CMAKE_FIND_ROOT_PATH=<dir> and CMAKE_FIND_ROOT_PATH_MODE_{PACKAGE,INCLUDE,
# LIBRARY}=ONLY searches only there, and PKG_CONFIG_LIBDIR=<dir>/pkgconfig (empty) hides every
# .pc file from pkg-config.
cmake_policy(VERSION 3.25)
file(REMOVE_RECURSE "${VIEW}")
file(MAKE_DIRECTORY "${VIEW}/usr/include" "${VIEW}/usr/lib" "${VIEW}/pkgconfig")
file(CREATE_LINK "${XXHASH_INCLUDE_DIR}/xxhash.h" "${VIEW}/usr/include/xxhash.h" SYMBOLIC)
get_filename_component(library "${XXHASH_LIBRARY}" NAME)
file(CREATE_LINK "${XXHASH_LIBRARY}" "${VIEW}/usr/lib/${library}" SYMBOLIC)
file(CREATE_LINK "${PREFIX}" "${VIEW}/idem" SYMBOLIC)
