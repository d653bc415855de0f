# shellcheck shell=bash
# The linker of the test command's builds: LLVM's lld when it is installed (scripts/deps test
# installs it). The test executables are large (the conformance kit instantiates every case for
# every cell) and lld links them several times faster than the system's BFD ld, which matters
# when ccache has made compiling cheap and relinking is most of a rebuild. IDEM_LLD=0 keeps the
# system's linker. Sets `link_flags` to the flags to add to CMAKE_EXE_LINKER_FLAGS (maybe empty).
# shellcheck disable=SC2034 # used by the script that sources this file
link_flags=
if [[ ${IDEM_LLD:-1} != 0 ]] && command -v ld.lld >/dev/null; then
  link_flags=-fuse-ld=lld
fi
