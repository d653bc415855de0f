# fmt for building idem's adapters: header-only (fmt::fmt-header-only) and linked
# $<BUILD_INTERFACE:...>, so it never reaches an installed adapter's link interface and a consumer
# never needs fmt. Sets IDEM_FMT_MISSING to what to install, or to "".
if(NOT TARGET fmt::fmt-header-only)
  find_package(fmt QUIET)
endif()
if(TARGET fmt::fmt-header-only)
  set(IDEM_FMT_MISSING "")
else()
  set(IDEM_FMT_MISSING "fmt, to build the adapter (Debian/Ubuntu: libfmt-dev)")
endif()
