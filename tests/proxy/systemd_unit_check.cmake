# Has systemd's own parser read share/idem/idem-proxy.service: `systemd-analyze verify` on a copy
# whose ExecStart names the built binary (verify checks that it exists and is executable) must
# exit 0 and print nothing (it prints a line for each directive it cannot use, and exits 0).
# cmake -DANALYZE=systemd-analyze -DUNIT=... -DPROXY=... -DWORK=DIR -P this file
file(READ ${UNIT} unit)
string(REPLACE "/usr/local/bin/idem-proxy" "${PROXY}" unit "${unit}")
if(NOT unit MATCHES "ExecStart=${PROXY} ")
  message(FATAL_ERROR "${UNIT}: no ExecStart=/usr/local/bin/idem-proxy line to point at the build")
endif()
file(MAKE_DIRECTORY ${WORK})
file(WRITE ${WORK}/idem-proxy.service "${unit}")
execute_process(COMMAND ${ANALYZE} verify --man=no ${WORK}/idem-proxy.service
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT status EQUAL 0 OR NOT "${out}${err}" STREQUAL "")
  message(FATAL_ERROR "systemd-analyze verify ${UNIT}: exit status ${status}\n${out}${err}")
endif()
