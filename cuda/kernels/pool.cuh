#pragma once
// Launchers of the 2-D pooling kernels (cuda/kernels/pool.cu); plain header (Note [CUDA kernel
// files]). Registered by cuda/kernels/pool_ops.cpp.
//
// Note [Pooling on the GPU]
// Inputs are read through their strides (any layout, no copy); outputs are written dense, in
// NCHW order or in channels-last order (chosen by the caller from the input's layout), one
// thread per output element in that memory order, so a channels-last tensor is walked with
// the channels fastest (coalesced). Backward kernels gather: one thread per input element sums
// the gradients of the windows that cover it, in the CPU kernel's order (output index
// ascending), so no atomics are needed and the result is deterministic — for max pooling the
// thread adds the gradients whose stored argmax is its own position.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace qflow::cuda::pool {

enum class Scalar { F32, F64 };

/// Element strides of a 4-D (N, C, H, W) view; n = 0 for an unbatched (C, H, W) tensor.
struct Strides4 {
  int64_t n = 0, c = 0, h = 0, w = 0;
};

struct Geometry {
  int64_t N = 1, C = 0, H = 0, W = 0, OH = 0, OW = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
};

/// y (and idx when non-null: int64 argmax ih * W + iw within its plane, PyTorch's convention)
/// dense (N, C, OH, OW), in channels-last order when out_channels_last.
void max_forward(Scalar s, const Geometry& g, const void* x, Strides4 xs, void* y, int64_t* idx,
                 bool out_channels_last, cudaStream_t stream);
/// gx dense (N, C, H, W), channels-last order when gx_channels_last.
void max_backward(Scalar s, const Geometry& g, const void* gy, Strides4 gys, const int64_t* idx, Strides4 is, void* gx,
                  bool gx_channels_last, cudaStream_t stream);

struct AvgOptions {
  bool count_include_pad = true;
  bool has_divisor = false;
  int64_t divisor = 1;
};
void avg_forward(Scalar s, const Geometry& g, const AvgOptions& o, const void* x, Strides4 xs, void* y,
                 bool out_channels_last, cudaStream_t stream);
void avg_backward(Scalar s, const Geometry& g, const AvgOptions& o, const void* gy, Strides4 gys, void* gx,
                  bool gx_channels_last, cudaStream_t stream);

/// Adaptive average pooling to (OH, OW) (windows [floor(i*H/OH), ceil((i+1)*H/OH))).
void adaptive_avg_forward(Scalar s, const Geometry& g, const void* x, Strides4 xs, void* y, bool out_channels_last,
                          cudaStream_t stream);
void adaptive_avg_backward(Scalar s, const Geometry& g, const void* gy, Strides4 gys, void* gx, bool gx_channels_last,
                           cudaStream_t stream);

}  // namespace qflow::cuda::pool
