# qflow_sanitized_readers_tests: the file readers (data and nn layers) and their tests built with
# ASan + UBSan inside an ordinary (Release) build, linked against that build's uninstrumented
# core and autograd objects. A whole sanitized build costs 6x a Release build in compile time
# (template-heavy kernels), far over CI's budget; the readers parse untrusted bytes and are cheap
# to compile, so CI checks them on every run (tools/run-tests, README "Sanitizers").
# Memory the uninstrumented layers allocate still gets ASan's redzones (malloc is intercepted), so
# a reader running past a tensor's storage is caught; what those layers do themselves is covered
# by the full sanitized build (tools/run-tests --sanitize), not by this target.
option(QFLOW_SANITIZED_READERS
       "Also build qflow_sanitized_readers_tests and qflow_sanitized_passes_tests (readers, graph passes under ASan + UBSan)" OFF)
if(NOT QFLOW_SANITIZED_READERS)
  return()
endif()
if(QFLOW_SANITIZE)
  message(FATAL_ERROR "QFLOW_SANITIZED_READERS is for uninstrumented builds; QFLOW_SANITIZE already instruments every test")
endif()

set(_san_layers data nn)
set(_san_tests
    data/*.cpp
    nn/safetensors_test.cpp nn/checkpoint_test.cpp nn/checkpoint_crash_test.cpp nn/state_dict_test.cpp
    nn/fuzz_regressions_test.cpp)
set(_sources)
foreach(layer IN LISTS _san_layers)
  file(GLOB_RECURSE _found CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${layer}/src/*.cpp)
  list(APPEND _sources ${_found})
endforeach()
foreach(pattern IN LISTS _san_tests)
  file(GLOB _found CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${pattern})
  list(APPEND _sources ${_found})
endforeach()

add_executable(qflow_sanitized_readers_tests ${_sources})
# -O1: ASan's recommended level; the sources are compiled again here, so -O3 would only cost time.
target_compile_options(qflow_sanitized_readers_tests PRIVATE
  -Wall -Wextra -O1 -g -fno-omit-frame-pointer
  -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all)
target_link_options(qflow_sanitized_readers_tests PRIVATE -fsanitize=address,undefined,float-cast-overflow)
target_include_directories(qflow_sanitized_readers_tests PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include)
foreach(layer IN LISTS QFLOW_LAYERS)  # headers of every layer (the tests include the umbrella header)
  target_include_directories(qflow_sanitized_readers_tests PRIVATE
    $<TARGET_PROPERTY:qflow_${layer},INTERFACE_INCLUDE_DIRECTORIES>)
endforeach()
foreach(layer core autograd)  # the layers below, as built for the ordinary suite
  target_sources(qflow_sanitized_readers_tests PRIVATE $<TARGET_OBJECTS:qflow_${layer}_objects>)
  target_link_libraries(qflow_sanitized_readers_tests PRIVATE qflow_${layer})
endforeach()
target_link_libraries(qflow_sanitized_readers_tests PRIVATE
  PNG::PNG ZLIB::ZLIB nlohmann_json::nlohmann_json GTest::gtest GTest::gmock GTest::gtest_main
  qflow_pause_write)  # nn/checkpoint_crash_test.cpp pauses its writer with it (tests/CMakeLists.txt)
target_compile_definitions(qflow_sanitized_readers_tests PRIVATE QFLOW_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
                                                                 QFLOW_BIN_DIR="${CMAKE_RUNTIME_OUTPUT_DIRECTORY}")
# The uninstrumented allocator would recycle freed blocks behind ASan's back: caching off.
# tools/run-tests exports the sanitizers' options (ASAN_OPTIONS, UBSAN_OPTIONS).
gtest_discover_tests(qflow_sanitized_readers_tests DISCOVERY_TIMEOUT 120 TEST_PREFIX "sanitized."
  PROPERTIES LABELS sanitized-readers ENVIRONMENT QFLOW_CACHE_LIMIT_MB=0)

# The graph passes (fx, quant, onnx) under ASan + UBSan, under the same switch.
include(${CMAKE_CURRENT_LIST_DIR}/QflowSanitizedPasses.cmake)
