// Device code of the matrix products (launchers declared in linalg.cuh).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/linalg.cuh"

namespace qflow::cuda::linalg {
namespace {

constexpr int kThreads = 256;

// Grid-stride over the row-major output; a row's elements are consecutive threads, so the
// writes coalesce and a broadcast bias row (s0 == 0, s1 == 1) is read coalesced too.
template <typename T>
__global__ void broadcast_fill_kernel(const T* __restrict__ src, int64_t s0, int64_t s1, T* __restrict__ out,
                                      int64_t rows, int64_t cols, T scale, bool scaled) {
  const int64_t n = rows * cols;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n; idx += step) {
    const int64_t i = idx / cols, j = idx - i * cols;
    const T v = src[i * s0 + j * s1];
    out[idx] = scaled ? scale * v : v;
  }
}

template <typename T>
void broadcast_fill(const T* src, int64_t s0, int64_t s1, T* out, int64_t rows, int64_t cols, double scale,
                    cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > 65536) blocks = 65536;
  broadcast_fill_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      src, s0, s1, out, rows, cols, static_cast<T>(scale), scale != 1.0);
}

}  // namespace

void launch_broadcast_fill(Elem elem, const void* src, int64_t s0, int64_t s1, void* out, int64_t rows, int64_t cols,
                           double scale, cudaStream_t stream) {
  if (elem == Elem::F32)
    broadcast_fill(static_cast<const float*>(src), s0, s1, static_cast<float*>(out), rows, cols, scale, stream);
  else
    broadcast_fill(static_cast<const double*>(src), s0, s1, static_cast<double*>(out), rows, cols, scale, stream);
}

}  // namespace qflow::cuda::linalg
