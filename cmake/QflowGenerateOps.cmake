# qflow_generate_ops(LAYER): the ops LAYER/ops/*.toml declares, made C++ by tools/gen-ops at build
# time: for each FILE.toml the typed functions' header qflow/LAYER/ops/FILE.h and a source with the
# registration and the definitions, both under build/generated/. They join the layer's objects;
# the header directory is public (and installed with the library's headers, QflowInstall.cmake).
#
# Note [One declaration per op]
# An op used to be written in up to eight places: its schema string and registration, a typed
# wrapper that spells every argument name again, the header declaration with the defaults a
# second time, ... and nothing checked that they agreed until the first call. Now an op is one
# table in its layer's ops/*.toml — the schema (names, types, defaults, returns) and a doc line —
# and tools/gen-ops writes the rest at build time: the header declaration (C++ types and
# defaults derived from the schema), the typed function, and the registration of the CPU kernel
# and shape rule (NAME_kernel, NAME_meta unless the table names others, templates included).
# The registration and the typed functions go into a .inc that the family's kernel file (named
# by the TOML's `kernels`) includes at its end, so they see the kernels where they are defined.
# A kernel that is missing or has another signature is a compile error in that file; a kernel
# file that does not include its .inc, an unknown type, a malformed schema or an op declared
# twice is a gen-ops error; all at build time.
# Why a generator and not X-macros: the schema string is the op's real declaration (the
# registry, the tracer, ONNX and the error messages read it), and C++ types and defaults follow
# from it mechanically; X-macros would make the schema a macro argument list that C++ then has
# to stringify back, with defaults and optional/list types spelled in a macro DSL that reads
# worse than the schema and errs in preprocessor messages. PyTorch does the same
# (native_functions.yaml). TOML because Python reads it with its standard library (tomllib).
# Every op is declared (core/ops/*.toml, fx/ops/sym.toml, quant/ops/*.toml); core's also make
# the Tensor methods (tensor_methods.h, included inside class Tensor).
# The parts the layers above add are declared in the same table: the derivative (`derivative =
# { node, rule, save, save_outputs }`, or `non_differentiable` / `no_derivative` with the
# reason), the CUDA kernel (`cuda = "kernel"`, or `no_cuda` / `device_generic`) and the ONNX
# converter (`onnx = "converter"`, or `no_onnx` with the reason). Which of them an op must
# declare follows from its schema (an op with a tensor argument has a derivative unless it is
# in-place, and a CUDA answer; every op has an ONNX answer), so an op that says nothing of one
# fails gen-ops. Layers stay one-way because the declaration is data: each layer above reads it
# (qflow_generate_op_part: autograd, cuda and onnx for core's ops, fx and quant for their own)
# and compiles the registrations into the file the family names (`derivatives`, `cuda_kernels`,
# `onnx_converters`), after that file's rules, kernels or converters, so a name that does not
# exist there fails that file's compilation. Core never sees the names. The run-time coverage
# tests (tests/onnx/op_coverage_test.cpp, tests/cuda/op_coverage_test.cpp) stay as a second
# check.
find_package(Python3 3.11 REQUIRED COMPONENTS Interpreter)  # tomllib: tools/gen-ops
set(QFLOW_GENERATED_DIR ${PROJECT_BINARY_DIR}/generated)

function(qflow_generate_ops layer)
  file(GLOB _decls CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/ops/*.toml)
  if(NOT _decls)
    return()
  endif()
  set(_outputs)
  foreach(decl IN LISTS _decls)
    get_filename_component(_family ${decl} NAME_WE)
    list(APPEND _outputs ${QFLOW_GENERATED_DIR}/include/qflow/${layer}/ops/${_family}.h
                         ${QFLOW_GENERATED_DIR}/${layer}/ops/${_family}.inc)
  endforeach()
  # core's ops also make the Tensor methods (a fragment class Tensor includes).
  set(_methods)
  if(layer STREQUAL "core")
    set(_methods --methods)
    list(APPEND _outputs ${QFLOW_GENERATED_DIR}/include/qflow/core/ops/tensor_methods.h)
  endif()
  # The stamp is the output: gen-ops rewrites a file only when its text changes (so nothing that
  # includes it rebuilds), and an output older than its declarations would rerun the command at
  # every build.
  set(_stamp ${QFLOW_GENERATED_DIR}/${layer}/ops.stamp)
  add_custom_command(OUTPUT ${_stamp}
                     BYPRODUCTS ${_outputs}
                     COMMAND Python3::Interpreter ${PROJECT_SOURCE_DIR}/tools/gen-ops --layer ${layer}
                             --src ${CMAKE_CURRENT_SOURCE_DIR} --out ${QFLOW_GENERATED_DIR} ${_methods} ${_decls}
                     DEPENDS ${_decls} ${PROJECT_SOURCE_DIR}/tools/gen-ops
                     COMMENT "gen-ops: the ${layer} layer's op declarations"
                     VERBATIM)
  # Not compiled themselves: listed so that they are made before the layer's sources, whose
  # kernel files include the .inc files (found through the private include directory).
  target_sources(qflow_${layer}_objects PRIVATE ${_stamp} ${_outputs})
  target_include_directories(qflow_${layer}_objects PRIVATE ${QFLOW_GENERATED_DIR})
  target_include_directories(qflow_${layer}_objects PUBLIC $<BUILD_INTERFACE:${QFLOW_GENERATED_DIR}/include>)
  target_include_directories(qflow_${layer} PUBLIC $<BUILD_INTERFACE:${QFLOW_GENERATED_DIR}/include>)
endfunction()

# qflow_generate_op_part(LAYER PART FROM DECLARING_LAYERS...): what LAYER registers for the ops the
# declaring layers declare (PART: derivatives, cuda or onnx), written by gen-ops --part into the
# .inc files that the families' `derivatives` / `cuda_kernels` / `onnx_converters` files of LAYER
# include at their end. Which files those are is read from the declarations, so the command's
# output is a stamp; each .inc is rewritten only when it changes, and the compiler's dependency
# files rebuild what includes it. A declaration that says nothing of the part (no derivative and
# no reason, ...) fails the declaring layer's own gen-ops run; a named function or kernel that
# does not exist fails the compilation of the file that includes the .inc.
function(qflow_generate_op_part layer part)
  cmake_parse_arguments(PARSE_ARGV 2 _arg "" "" "FROM")
  set(_decls)
  foreach(from IN LISTS _arg_FROM)
    file(GLOB _found CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${from}/ops/*.toml)
    list(APPEND _decls ${_found})
  endforeach()
  string(JOIN ", " _from_text ${_arg_FROM})
  set(_stamp ${QFLOW_GENERATED_DIR}/${layer}/${part}.stamp)
  add_custom_command(OUTPUT ${_stamp}
                     COMMAND Python3::Interpreter ${PROJECT_SOURCE_DIR}/tools/gen-ops --part ${part} --layer ${layer}
                             --src ${CMAKE_CURRENT_SOURCE_DIR} --out ${QFLOW_GENERATED_DIR} ${_decls}
                     DEPENDS ${_decls} ${PROJECT_SOURCE_DIR}/tools/gen-ops
                     COMMENT "gen-ops: ${layer} registers ${part} parts for the ops of ${_from_text}"
                     VERBATIM)
  target_sources(qflow_${layer}_objects PRIVATE ${_stamp})
  target_include_directories(qflow_${layer}_objects PRIVATE ${QFLOW_GENERATED_DIR})
endfunction()
