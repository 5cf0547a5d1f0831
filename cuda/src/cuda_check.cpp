#include "cuda_check.h"

#include <fmt/format.h>

#include "qflow/core/error.h"

namespace qflow::cuda {

void throw_cuda_error(cudaError_t status, const char* what, const char* file, int line) {
  cudaGetLastError();  // clear a sticky launch error so the next op reports its own
  detail::throw_error(file, line,
                      fmt::format("{}: CUDA error {} ({}): {}", what, cudaGetErrorName(status), static_cast<int>(status),
                                  cudaGetErrorString(status)));
}

void throw_cublas_error(cublasStatus_t status, const char* what, const char* file, int line) {
  detail::throw_error(file, line, fmt::format("{}: cuBLAS error {} ({})", what, cublasGetStatusName(status),
                                              static_cast<int>(status)));
}

void throw_cudnn_error(cudnnStatus_t status, const char* what, const char* file, int line) {
  char message[256] = {};
  cudnnGetLastErrorString(message, sizeof(message));
  detail::throw_error(file, line, fmt::format("{}: cuDNN error {} ({}){}{}", what, cudnnGetErrorString(status),
                                              static_cast<int>(status), message[0] ? ": " : "", message));
}

}  // namespace qflow::cuda
