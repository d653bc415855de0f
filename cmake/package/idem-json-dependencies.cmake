# What idem::json (idem/codecs/json.hpp) links: nlohmann-json, from its own CMake config. Read by
# idem's own build (cmake/IdemJson.cmake) and, installed, by idemConfig.cmake when a consumer asks
# for the json component. Sets IDEM_JSON_MISSING to what to install, or to "" when it was found.
set(IDEM_JSON_MISSING "")
if(NOT TARGET nlohmann_json::nlohmann_json)
  find_package(nlohmann_json 3 CONFIG QUIET)
endif()
if(NOT TARGET nlohmann_json::nlohmann_json)
  set(IDEM_JSON_MISSING "nlohmann-json 3 (Debian/Ubuntu: nlohmann-json3-dev)")
endif()
