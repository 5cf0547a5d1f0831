# ctest's install:consumer test (Note [Installed library]): installs this build into a fresh
# prefix, extracts the README's "Writing a model" and "Quantization aware training" programs,
# builds them as a separate CMake project with find_package(qflow), and runs them.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -P run_consumer_test.cmake
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_consumer_test.cmake: -D${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
set(_prefix ${WORK_DIR}/prefix)

# A sanitized build (QFLOW_SANITIZE, tools/run-tests --sanitize) installs an instrumented
# libqflow.so, which calls the sanitizers' runtime (__asan_report_load4, ...): the consumer is
# built with the same -fsanitize flags, as a user of such a build would.
file(STRINGS ${BUILD_DIR}/CMakeCache.txt _sanitize REGEX "^QFLOW_SANITIZE:")
string(REGEX REPLACE "^[^=]*=" "" _sanitize "${_sanitize}")
set(_sanitize_flags)
if(_sanitize)
  string(REPLACE "," ";" _sans "${_sanitize}")
  foreach(_san IN LISTS _sans)
    list(APPEND _sanitize_flags -fsanitize=${_san})
  endforeach()
  list(APPEND _sanitize_flags -fno-omit-frame-pointer -fno-sanitize-recover=all)
  message(STATUS "qflow was built with QFLOW_SANITIZE=${_sanitize}: the consumer is built with ${_sanitize_flags}")
endif()

message(STATUS "installing ${BUILD_DIR} into ${_prefix}")
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${_prefix}
                OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)

# The first ```cpp block after each heading, written out as the program it is.
file(READ ${SOURCE_DIR}/README.md _readme)
function(extract_example heading out)
  string(FIND "${_readme}" "\n${heading}\n" _at)
  if(_at EQUAL -1)
    message(FATAL_ERROR "README.md has no heading '${heading}'")
  endif()
  string(SUBSTRING "${_readme}" ${_at} -1 _rest)
  string(FIND "${_rest}" "```cpp\n" _open)
  if(_open EQUAL -1)
    message(FATAL_ERROR "README.md: no ```cpp block after '${heading}'")
  endif()
  math(EXPR _open "${_open} + 7")
  string(SUBSTRING "${_rest}" ${_open} -1 _rest)
  string(FIND "${_rest}" "```" _close)
  string(SUBSTRING "${_rest}" 0 ${_close} _code)
  file(WRITE ${out} "${_code}")
endfunction()
set(_examples ${WORK_DIR}/examples)
extract_example("## Writing a model" ${_examples}/writing_a_model.cpp)
extract_example("## Quantization aware training" ${_examples}/quantization_aware_training.cpp)

message(STATUS "configuring and building the consumer project against the installed qflow")
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer -B ${WORK_DIR}/build
                        -DCMAKE_PREFIX_PATH=${_prefix} -DREADME_EXAMPLES=${_examples} -DCMAKE_BUILD_TYPE=Release
                        "-DQFLOW_SANITIZE=${_sanitize}"
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build -j 2 COMMAND_ERROR_IS_FATAL ANY)

foreach(program writing_a_model quantization_aware_training)
  message(STATUS "running ${program}")
  execute_process(COMMAND ${WORK_DIR}/build/${program} WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE _status
                  OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  message(STATUS "${_out}${_err}")
  if(NOT _status EQUAL 0)
    message(FATAL_ERROR "${program} exited with ${_status}")
  endif()
endforeach()
# The same program from a plain command line through pkg-config.
find_program(_pkg_config pkg-config REQUIRED)
file(GLOB_RECURSE _pc ${_prefix}/*/qflow.pc)
get_filename_component(_pc_dir "${_pc}" DIRECTORY)
set(ENV{PKG_CONFIG_PATH} ${_pc_dir})
execute_process(COMMAND ${_pkg_config} --cflags --libs qflow OUTPUT_VARIABLE _flags OUTPUT_STRIP_TRAILING_WHITESPACE
                COMMAND_ERROR_IS_FATAL ANY)
separate_arguments(_flags UNIX_COMMAND "${_flags}")
message(STATUS "pkg-config --cflags --libs qflow: ${_flags}")
execute_process(COMMAND c++ ${_sanitize_flags} ${_examples}/writing_a_model.cpp -o ${WORK_DIR}/writing_a_model_pc ${_flags}
                COMMAND_ERROR_IS_FATAL ANY)
# A plain link records no run-time path (CMake's does): the loader is told, as a user would be.
get_filename_component(_lib_dir "${_pc_dir}" DIRECTORY)
execute_process(COMMAND ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${_lib_dir} ${WORK_DIR}/writing_a_model_pc
                WORKING_DIRECTORY ${WORK_DIR} OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)

if(NOT EXISTS ${WORK_DIR}/net.safetensors)
  message(FATAL_ERROR "writing_a_model did not save net.safetensors")
endif()

# The build tree as a package (cmake/QflowInstall.cmake's export()): the same project configured
# with -Dqflow_DIR=<build>, as a developer working beside a checkout does; one program is enough
# to show the route works (the headers come from the sources, libqflow.so from the build tree).
message(STATUS "configuring and building the consumer project against the build tree (-Dqflow_DIR)")
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer -B ${WORK_DIR}/build-tree-consumer
                        -Dqflow_DIR=${BUILD_DIR} -DREADME_EXAMPLES=${_examples} -DCMAKE_BUILD_TYPE=Release
                        "-DQFLOW_SANITIZE=${_sanitize}"
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build-tree-consumer --target writing_a_model
                COMMAND_ERROR_IS_FATAL ANY)
file(REMOVE ${WORK_DIR}/net.safetensors)
execute_process(COMMAND ${WORK_DIR}/build-tree-consumer/writing_a_model WORKING_DIRECTORY ${WORK_DIR}
                OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
if(NOT EXISTS ${WORK_DIR}/net.safetensors)
  message(FATAL_ERROR "writing_a_model built against the build tree did not save net.safetensors")
endif()
