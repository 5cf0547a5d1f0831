# Every third-party dependency is found here, once. tools/setup-deps installs them.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(Eigen3 3.3 REQUIRED NO_MODULE)
find_package(fmt REQUIRED)
find_package(PNG REQUIRED)
find_package(ZLIB REQUIRED)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
# oneDNN (libdnnl-dev, OpenMP runtime): float32 convolutions, see Note [oneDNN convolution].
find_package(dnnl REQUIRED CONFIG)
# Open MPI (openmpi-bin, libopenmpi-dev): data-parallel training, see Note [Process group].
find_package(MPI REQUIRED COMPONENTS CXX)
if(QFLOW_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(QFLOW_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()
find_package(nlohmann_json REQUIRED)
# ONNX export: protobuf, and the official ONNX schema from Debian's libonnx-dev (compiled with protoc).
find_package(Protobuf REQUIRED)
find_file(QFLOW_ONNX_PROTO NAMES onnx/onnx.proto REQUIRED)
