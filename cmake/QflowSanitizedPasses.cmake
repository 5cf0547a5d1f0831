# qflow_sanitized_passes_tests: the graph layers (fx, quant, onnx) and a subset of their tests
# built with ASan + UBSan inside an ordinary (Release) build, like qflow_sanitized_readers_tests
# (cmake/QflowSanitizedReaders.cmake, which includes this file under the same switch,
# QFLOW_SANITIZED_READERS: CI's sanitizer subset). The layers below (core, autograd, nn, models)
# are linked as the ordinary suite built them, uninstrumented.
# The graph passes rewrite fx graphs while they walk them; two heap-use-after-frees went unseen
# until a full sanitized build (Note [Erasing during a walk] in fx/include/qflow/fx/graph.h),
# which is far over CI's budget. These tests keep the passes under ASan on every CI run:
#   - every fx test (the graph IR, tracing, pattern rewrites, fusions; erase_during_walk_test);
#   - the integer deploy passes on ResNet18 (quant::fuse_integer_layers:
#     tests/quant/integer_deploy_test.cpp);
#   - the ONNX export errors (module inlining: tests/onnx/export_errors_test.cpp).
# The zoo-wide and numeric suites (integer_zoo_test, pass_deploy_test, the exports onnxruntime
# runs, ...) stay in the ordinary suite and the full sanitized build (tools/run-tests --sanitize).
set(_san_pass_layers fx quant onnx)
set(_san_pass_tests
    fx/*.cpp
    quant/integer_deploy_test.cpp quant/layer_by_layer.cpp
    onnx/export_errors_test.cpp)
set(_sources)
foreach(layer IN LISTS _san_pass_layers)
  file(GLOB_RECURSE _found CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${layer}/src/*.cpp)
  list(APPEND _sources ${_found})
endforeach()
foreach(pattern IN LISTS _san_pass_tests)
  file(GLOB _found CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${pattern})
  list(APPEND _sources ${_found})
endforeach()

add_executable(qflow_sanitized_passes_tests ${_sources})
# -O1: ASan's recommended level, as for the readers. GCC 12 at -O1 with ASan reports
# -Wmaybe-uninitialized inside libstdc++'s std::regex (quant/src/qconfig/qconfig_mapping_json.cpp); the
# ordinary build keeps the warning for qflow's own code.
target_compile_options(qflow_sanitized_passes_tests PRIVATE
  -Wall -Wextra -Wno-maybe-uninitialized -O1 -g -fno-omit-frame-pointer
  -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all)
target_link_options(qflow_sanitized_passes_tests PRIVATE -fsanitize=address,undefined,float-cast-overflow)
target_include_directories(qflow_sanitized_passes_tests PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include)
foreach(layer IN LISTS QFLOW_LAYERS)  # headers of every layer (the tests include the umbrella header)
  target_include_directories(qflow_sanitized_passes_tests PRIVATE
    $<TARGET_PROPERTY:qflow_${layer},INTERFACE_INCLUDE_DIRECTORIES>)
endforeach()
foreach(layer IN LISTS _san_pass_layers)  # the layers' private headers (onnx/src/converter.h, ...)
  target_include_directories(qflow_sanitized_passes_tests PRIVATE ${PROJECT_SOURCE_DIR}/${layer})
  # The layer's kernel files include the registrations gen-ops writes (Note [One declaration per
  # op]): made with the layer's objects, found in the generated directory.
  if(TARGET qflow_${layer}_objects)
    add_dependencies(qflow_sanitized_passes_tests qflow_${layer}_objects)
  endif()
endforeach()
target_include_directories(qflow_sanitized_passes_tests PRIVATE ${QFLOW_GENERATED_DIR})
foreach(layer core autograd nn models)  # the layers below, as built for the ordinary suite
  target_sources(qflow_sanitized_passes_tests PRIVATE $<TARGET_OBJECTS:qflow_${layer}_objects>)
  target_link_libraries(qflow_sanitized_passes_tests PRIVATE qflow_${layer})
endforeach()
target_link_libraries(qflow_sanitized_passes_tests PRIVATE
  qflow_onnx_proto nlohmann_json::nlohmann_json GTest::gtest GTest::gmock GTest::gtest_main)
target_compile_definitions(qflow_sanitized_passes_tests PRIVATE QFLOW_VERSION="${PROJECT_VERSION}"
                                                                QFLOW_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
                                                                QFLOW_BIN_DIR="${CMAKE_RUNTIME_OUTPUT_DIRECTORY}")
# The uninstrumented allocator would recycle freed blocks behind ASan's back: caching off.
gtest_discover_tests(qflow_sanitized_passes_tests DISCOVERY_TIMEOUT 120 TEST_PREFIX "sanitized."
  PROPERTIES LABELS sanitized-passes ENVIRONMENT QFLOW_CACHE_LIMIT_MB=0)
