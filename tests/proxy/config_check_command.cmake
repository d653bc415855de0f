# Runs `PROXY --config CONFIG --check-config` and checks its exit status (EXPECT_EXIT) and that
# its standard output and error match the regular expressions EXPECT_OUT and EXPECT_ERR.
# cmake -DPROXY=... -DCONFIG=... -DEXPECT_EXIT=N -DEXPECT_OUT=RE -DEXPECT_ERR=RE -P this file
execute_process(COMMAND ${PROXY} --config ${CONFIG} --check-config
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 30)
set(failed FALSE)
if(NOT status STREQUAL EXPECT_EXIT)
  message(SEND_ERROR "exit status ${status}, expected ${EXPECT_EXIT}")
  set(failed TRUE)
endif()
if(NOT out MATCHES "${EXPECT_OUT}")
  message(SEND_ERROR "standard output does not match '${EXPECT_OUT}'")
  set(failed TRUE)
endif()
if(NOT err MATCHES "${EXPECT_ERR}")
  message(SEND_ERROR "standard error does not match '${EXPECT_ERR}'")
  set(failed TRUE)
endif()
if(failed)
  message(FATAL_ERROR "idem-proxy --config ${CONFIG} --check-config\n--- stdout:\n${out}"
                      "--- stderr:\n${err}")
endif()
