# Which public header ships with which library. A compiled backend's headers live in its own folder
# (include/idem/<backend>/) and its src/<backend>/CMakeLists.txt installs them with its library
# (idem_folder_headers below); the conformance kit's (include/idem/testing, on GoogleTest) ship
# with idem::testing only, and each optional component's with that component, so an idem built
# without them installs none of them. Every other header under include/idem is the header-only
# core's (IDEM_CORE_HEADERS), the memory backend's (include/idem/memory) included. Absolute paths,
# for FILE_SETs.
set(_idem_include "${PROJECT_SOURCE_DIR}/include")

# The folders of the compiled backends (each backend's, and the SQL layer that SQLite and
# PostgreSQL share): an include/idem/<folder>/ with a src/<folder>/CMakeLists.txt. None of their
# headers is the core's.
set(IDEM_BACKEND_FOLDERS "")
file(GLOB _idem_candidates RELATIVE "${_idem_include}/idem" "${_idem_include}/idem/*")
foreach(_idem_folder IN LISTS _idem_candidates)
  if(IS_DIRECTORY "${_idem_include}/idem/${_idem_folder}"
     AND EXISTS "${PROJECT_SOURCE_DIR}/src/${_idem_folder}/CMakeLists.txt")
    list(APPEND IDEM_BACKEND_FOLDERS ${_idem_folder})
  endif()
endforeach()
unset(_idem_candidates)
unset(_idem_folder)

set(IDEM_PROMETHEUS_HEADERS # the optional observer components: metrics, on prometheus-cpp
  idem/prometheus.hpp)
set(IDEM_SPDLOG_HEADERS # and logs, on spdlog
  idem/spdlog.hpp)
set(IDEM_GRPC_HEADERS
  idem/codecs/protobuf.hpp
  idem/grpc.hpp)

set(IDEM_JSON_HEADERS # the JSON codec, on nlohmann-json
  idem/codecs/json.hpp)

# The asynchronous guard, on Boost.Asio (idem::asio); each backend's asynchronous store
# (<backend>/async_store.hpp) ships with that backend's idem::asio_<backend>.
file(GLOB_RECURSE IDEM_ASIO_HEADERS CONFIGURE_DEPENDS RELATIVE "${_idem_include}"
     "${_idem_include}/idem/asio/*.hpp")
file(GLOB_RECURSE IDEM_TESTING_HEADERS CONFIGURE_DEPENDS RELATIVE "${_idem_include}"
     "${_idem_include}/idem/testing/*.hpp")
# The kit's asynchronous face and blocking adapter: shipped with the kit, and usable where
# idem::asio is linked too (Boost.Asio).
set(IDEM_TESTING_ASIO_HEADERS
  idem/testing/async_face.hpp
  idem/testing/async_store_conformance.hpp
  idem/testing/blocking_store.hpp)
list(REMOVE_ITEM IDEM_TESTING_HEADERS ${IDEM_TESTING_ASIO_HEADERS})

file(GLOB_RECURSE IDEM_CORE_HEADERS CONFIGURE_DEPENDS RELATIVE "${_idem_include}"
     "${_idem_include}/idem/*.hpp")
list(JOIN IDEM_BACKEND_FOLDERS "|" _idem_folders)
list(FILTER IDEM_CORE_HEADERS EXCLUDE REGEX "^idem/(${_idem_folders})/")
foreach(_idem_list GRPC ASIO TESTING TESTING_ASIO JSON PROMETHEUS SPDLOG)
  foreach(_idem_header IN LISTS IDEM_${_idem_list}_HEADERS)
    if(NOT _idem_header IN_LIST IDEM_CORE_HEADERS)
      message(FATAL_ERROR "cmake/IdemHeaders.cmake: IDEM_${_idem_list}_HEADERS names "
                          "${_idem_header}, which is not under include/")
    endif()
  endforeach()
  list(REMOVE_ITEM IDEM_CORE_HEADERS ${IDEM_${_idem_list}_HEADERS})
  list(TRANSFORM IDEM_${_idem_list}_HEADERS PREPEND "${_idem_include}/")
endforeach()
list(TRANSFORM IDEM_CORE_HEADERS PREPEND "${_idem_include}/")
unset(_idem_folders)
unset(_idem_list)
unset(_idem_header)

# idem_target_headers(<target> <INTERFACE|PUBLIC> <header>...): the headers <target> installs.
function(idem_target_headers target scope)
  target_sources(${target} ${scope} FILE_SET HEADERS BASE_DIRS "${_idem_include}" FILES ${ARGN})
endfunction()

# idem_folder_headers(<variable> <folder> [EXCLUDE <name>...]): the headers under
# include/idem/<folder>/ (absolute paths), without the named ones (relative to the folder).
function(idem_folder_headers variable folder)
  cmake_parse_arguments(PARSE_ARGV 2 ARG "" "" "EXCLUDE")
  set(dir "${PROJECT_SOURCE_DIR}/include/idem/${folder}")
  file(GLOB_RECURSE headers CONFIGURE_DEPENDS "${dir}/*.hpp")
  foreach(name IN LISTS ARG_EXCLUDE)
    if(NOT "${dir}/${name}" IN_LIST headers)
      message(FATAL_ERROR "idem_folder_headers: no ${name} in include/idem/${folder}")
    endif()
    list(REMOVE_ITEM headers "${dir}/${name}")
  endforeach()
  set(${variable} ${headers} PARENT_SCOPE)
endfunction()
