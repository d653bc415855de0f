# The SQL stores' benchmarks, included from the top-level CMakeLists.txt (SQL adapters block) so
# that they need no edit of bench/CMakeLists.txt. Built into build/bench like the others.
# idem_bench_sqlite runs in scripts/main; idem_bench_postgres needs IDEM_BENCH_PG_URI.

foreach(_idem_backend sqlite postgres)
  string(TOUPPER ${_idem_backend} _idem_upper)
  if(IDEM_WITH_${_idem_upper})
    add_executable(idem_bench_${_idem_backend} ${PROJECT_SOURCE_DIR}/bench/${_idem_backend}_bench.cpp)
    # The bare twins run the library's statement text (src/sql/statements.hpp) without it.
    target_include_directories(idem_bench_${_idem_backend} PRIVATE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(idem_bench_${_idem_backend} PRIVATE idem::${_idem_backend}
                          benchmark::benchmark idem_warnings)
    set_target_properties(idem_bench_${_idem_backend} PROPERTIES
      RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bench)
  endif()
endforeach()
