// Copy kernels: dtype conversion through any strides (to, clone, contiguous, copy_) and fills
// (fill_, zero_), on strided.cuh's loops (Note [Strided geometry]): dense operands of one
// layout are copied as flat, 128-bit vectorised arrays.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/copy.cuh"
#include "kernels/strided.cuh"

namespace qflow::cuda {
namespace {

template <typename TO, typename FROM>
struct CastFn {
  __device__ __forceinline__ TO operator()(FROM v) const { return static_cast<TO>(v); }
};

template <typename T>
struct FillFn {
  T value;
  __device__ __forceinline__ T operator()() const { return value; }
};

}  // namespace

void launch_cast(ScalarType to, ScalarType from, const StridedGeometry& g, void* out, const void* in,
                 cudaStream_t stream) {
  dispatch_all(to, [&](auto to_tag) {
    using TO = typename decltype(to_tag)::type;
    dispatch_all(from, [&](auto from_tag) {
      using FROM = typename decltype(from_tag)::type;
      launch_elementwise(g, stream, CastFn<TO, FROM>{}, static_cast<TO*>(out), static_cast<const FROM*>(in));
    });
  });
}

void launch_fill(ScalarType dtype, const StridedGeometry& g, void* out, ScalarArg value, cudaStream_t stream) {
  dispatch_all(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_elementwise(g, stream, FillFn<T>{scalar_as<T>(value)}, static_cast<T*>(out));
  });
}

}  // namespace qflow::cuda
