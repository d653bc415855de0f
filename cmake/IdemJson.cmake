# Detects the dependency of the JSON codec idem_json (idem::json, include/idem/codecs/json.hpp),
# nlohmann-json, and sets IDEM_HAVE_JSON, and IDEM_JSON_MISSING to what to install when it is
# missing (the lookup is cmake/package/idem-json-dependencies.cmake, which an installed idem's
# config reads too).
include("${CMAKE_CURRENT_LIST_DIR}/package/idem-json-dependencies.cmake")
if(IDEM_JSON_MISSING STREQUAL "")
  set(IDEM_HAVE_JSON ON)
else()
  set(IDEM_HAVE_JSON OFF)
endif()
