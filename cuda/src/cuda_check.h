#pragma once
// CUDA, cuBLAS and cuDNN status codes turned into qflow::Error naming the op (Note [Errors]).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

namespace qflow::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* what, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* what, const char* file, int line);
[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* what, const char* file, int line);

}  // namespace qflow::cuda

/// QFLOW_CUDA_CHECK(cudaMemcpyAsync(...), "to_device"): throws qflow::Error
/// "to_device: CUDA error cudaErrorInvalidValue (1): invalid argument" on failure.
#define QFLOW_CUDA_CHECK(expr, what)                                                                  \
  do {                                                                                                \
    const cudaError_t qflow_status_ = (expr);                                                         \
    if (qflow_status_ != cudaSuccess) [[unlikely]]                                                    \
      ::qflow::cuda::throw_cuda_error(qflow_status_, what, __FILE__, __LINE__);                       \
  } while (0)
/// After a kernel launch: a bad launch configuration shows up here, not at the next sync.
#define QFLOW_CUDA_CHECK_LAUNCH(what) QFLOW_CUDA_CHECK(cudaGetLastError(), what)
#define QFLOW_CUBLAS_CHECK(expr, what)                                                                \
  do {                                                                                                \
    const cublasStatus_t qflow_status_ = (expr);                                                      \
    if (qflow_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                                          \
      ::qflow::cuda::throw_cublas_error(qflow_status_, what, __FILE__, __LINE__);                     \
  } while (0)
#define QFLOW_CUDNN_CHECK(expr, what)                                                                 \
  do {                                                                                                \
    const cudnnStatus_t qflow_status_ = (expr);                                                       \
    if (qflow_status_ != CUDNN_STATUS_SUCCESS) [[unlikely]]                                           \
      ::qflow::cuda::throw_cudnn_error(qflow_status_, what, __FILE__, __LINE__);                      \
  } while (0)
