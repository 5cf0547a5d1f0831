// Gather and scatter kernels of index_select and index_add (index.cuh).
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/index.cuh"
#include "kernels/strided.cuh"

namespace qflow::cuda {
namespace {

template <typename T>
__global__ void __launch_bounds__(kThreads) index_select_kernel(T* out, const T* in, const int64_t* index,
                                                                int64_t outer, int64_t size, int64_t n, int64_t inner) {
  const int64_t total = outer * n * inner;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = k % inner;
    const int64_t r = k / inner;
    const int64_t j = r % n, o = r / n;
    const int64_t idx = index[j];
    if (idx < 0 || idx >= size) __trap();  // index_select: index out of range
    out[k] = in[(o * size + idx) * inner + i];
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) index_add_kernel(T* out, const T* source, const int64_t* index,
                                                             int64_t outer, int64_t size, int64_t n, int64_t inner,
                                                             T alpha) {
  const int64_t columns = outer * inner;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < columns;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = c / inner, i = c % inner;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t idx = index[j];
      if (idx < 0 || idx >= size) __trap();  // index_add: index out of range
      T& to = out[(o * size + idx) * inner + i];
      const T from = source[(o * n + j) * inner + i];
      if constexpr (std::is_same_v<T, bool>) to = to || (alpha && from);
      else to = static_cast<T>(to + alpha * from);
    }
  }
}

}  // namespace

void launch_index_select(ScalarType dtype, void* out, const void* in, const int64_t* index, int64_t outer, int64_t size,
                         int64_t n, int64_t inner, cudaStream_t stream) {
  const int64_t total = outer * n * inner;
  if (total == 0) return;
  dispatch_all(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    index_select_kernel<T><<<grid_for(total), kThreads, 0, stream>>>(static_cast<T*>(out), static_cast<const T*>(in),
                                                                    index, outer, size, n, inner);
  });
}

void launch_index_add(ScalarType dtype, void* out, const void* source, const int64_t* index, int64_t outer,
                      int64_t size, int64_t n, int64_t inner, ScalarArg alpha, cudaStream_t stream) {
  const int64_t columns = outer * inner;
  if (columns == 0 || n == 0) return;
  dispatch_all(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    index_add_kernel<T><<<grid_for(columns), kThreads, 0, stream>>>(static_cast<T*>(out),
                                                                   static_cast<const T*>(source), index, outer, size, n,
                                                                   inner, scalar_as<T>(alpha));
  });
}

}  // namespace qflow::cuda
