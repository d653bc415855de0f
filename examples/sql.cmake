# The SQL stores' examples, included from the top-level CMakeLists.txt (SQL adapters block) so
# that they need no edit of examples/CMakeLists.txt. Built into build/examples, where scripts/main
# runs every example_*: example_orders_postgres without a URI says so and exits 0.

foreach(_idem_backend sqlite postgres)
  string(TOUPPER ${_idem_backend} _idem_upper)
  if(IDEM_WITH_${_idem_upper})
    add_executable(example_orders_${_idem_backend}
                   ${PROJECT_SOURCE_DIR}/examples/orders_${_idem_backend}.cpp)
    target_link_libraries(example_orders_${_idem_backend} PRIVATE idem::${_idem_backend} fmt::fmt
                          idem_warnings)
    set_target_properties(example_orders_${_idem_backend} PROPERTIES
      RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/examples)
  endif()
endforeach()
