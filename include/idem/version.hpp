#pragma once
// The library's version, and its only source: CMake reads these lines (cmake/IdemVersion.cmake)
// for project(), the package version file and the pkg-config files.

#define IDEM_VERSION_MAJOR 0
#define IDEM_VERSION_MINOR 1
#define IDEM_VERSION_PATCH 0
#define IDEM_VERSION (IDEM_VERSION_MAJOR * 10000 + IDEM_VERSION_MINOR * 100 + IDEM_VERSION_PATCH)
