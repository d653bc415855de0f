# shellcheck shell=bash
# The compiler launcher of idem's builds: ccache when it is installed (scripts/deps test installs
# it), so that a file compiled before with the same flags is not compiled again, in this clone or
# another: paths are taken relative to the clone's root and the build folder's own path is not
# hashed. IDEM_CCACHE=0 turns it off. Sets `launcher` to the CMake options, or to none.
# Needs `root`, the repository's root.
# shellcheck disable=SC2034 # used by the script that sources this file
launcher=()
if [[ ${IDEM_CCACHE:-1} != 0 ]] && command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
