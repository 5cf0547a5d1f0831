# Warnings, optimisation and sanitizers shared by every qflow target.
add_library(qflow_options INTERFACE)
# Host-compiler flags apply to C++ sources only: nvcc (cuda/kernels/*.cu) takes its own.
target_compile_options(qflow_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>)
if(CMAKE_BUILD_TYPE STREQUAL "Release")
  target_compile_options(qflow_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-O3>)
endif()
if(QFLOW_NATIVE)
  target_compile_options(qflow_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-march=native>)
endif()
if(QFLOW_SANITIZE)
  string(REPLACE "," ";" _qflow_sans "${QFLOW_SANITIZE}")
  foreach(_san IN LISTS _qflow_sans)
    target_compile_options(qflow_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${_san} -fno-omit-frame-pointer>)
    target_link_options(qflow_options INTERFACE -fsanitize=${_san})
  endforeach()
  target_compile_options(qflow_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=all>)
endif()
# libFuzzer builds (tools/fuzz): the layers get coverage instrumentation without libFuzzer's
# main (fuzzer-no-link); only the executables in fuzz/ link -fsanitize=fuzzer. UBSan findings
# abort, so the fuzzer reports them as crashes.
if(QFLOW_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "QFLOW_FUZZ needs clang's libFuzzer: configure with CXX=clang++ (tools/fuzz does)")
  endif()
  target_compile_options(qflow_options INTERFACE -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                                                 -fno-omit-frame-pointer -g)
  target_link_options(qflow_options INTERFACE -fsanitize=address,undefined)
endif()

# Ops, derivatives and layers register themselves from static initialisers in their own
# files (no central list to edit). A static library would drop such object files, so each
# layer is built as an OBJECT library, packed into its static library for users, and
# in-tree executables link the objects of every layer directly. See Note [Op registration].
set(QFLOW_LAYERS core autograd nn fx quant data models onnx distributed)
if(QFLOW_HAVE_CUDA)
  list(INSERT QFLOW_LAYERS 1 cuda)  # above core, below everything else (Note [CUDA backend])
endif()
function(qflow_link_layers target)
  foreach(layer IN LISTS QFLOW_LAYERS)
    target_link_libraries(${target} PRIVATE qflow_${layer})
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:qflow_${layer}_objects>)
  endforeach()
endfunction()

# qflow_layer(NAME core SOURCE_DIRS src kernels DEPS ... PRIVATE_DEPS ...)
function(qflow_layer)
  cmake_parse_arguments(L "" "NAME" "DEPS;PRIVATE_DEPS;SOURCE_DIRS" ${ARGN})
  set(_sources)
  foreach(dir IN LISTS L_SOURCE_DIRS)
    file(GLOB_RECURSE _found CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${dir}/*.cpp ${CMAKE_CURRENT_SOURCE_DIR}/${dir}/*.cu)
    list(APPEND _sources ${_found})
  endforeach()
  if(NOT _sources)
    # A layer a later issue fills: keep the target so the link graph is already right.
    set(_stub ${CMAKE_CURRENT_BINARY_DIR}/qflow_${L_NAME}_layer.cpp)
    file(WRITE ${_stub} "// ${L_NAME}: no sources yet\n")
    set(_sources ${_stub})
  endif()
  set(_objects qflow_${L_NAME}_objects)
  add_library(${_objects} OBJECT ${_sources})
  target_include_directories(${_objects} PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
                                         PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(${_objects} PUBLIC ${L_DEPS} PRIVATE qflow_options ${L_PRIVATE_DEPS})
  set_target_properties(${_objects} PROPERTIES POSITION_INDEPENDENT_CODE ON)

  add_library(qflow_${L_NAME} STATIC $<TARGET_OBJECTS:${_objects}>)
  target_include_directories(qflow_${L_NAME} PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>)
  target_link_libraries(qflow_${L_NAME} PUBLIC ${L_DEPS} PRIVATE ${L_PRIVATE_DEPS})
endfunction()
