#pragma once
// Launchers of the batch-norm kernels (cuda/kernels/norm.cu); plain header (Note [CUDA kernel
// files]). Registered by cuda/kernels/norm_ops.cpp.
//
// Note [Batch norm on the GPU]
// The input is seen in one of two memory layouts:
//  - rows:   [R, C] row-major (a dense channels-last 4-D tensor, R = N*H*W; or an (N, C) or
//            (N, C, 1...) contiguous tensor, R = N). Thread blocks cover a tile of rows x
//            channels; a warp reads consecutive channels (coalesced 128-bit loads along C).
//  - planes: (N, C, S) contiguous (NCHW): blocks reduce one channel's N planes of S elements.
// Statistics take two stages so that they are deterministic: each block writes a partial
// (count, mean, M2) per channel (Welford within a thread, Chan's merge across threads in a
// fixed tree order), and one small kernel merges the partials per channel in a fixed order in
// double, then updates the running statistics (momentum, unbiased variance) exactly as the
// CPU kernel does and writes the saved mean/invstd and the per-channel scale/shift. The
// backward's sums go the same way. No float atomics anywhere: repeated runs are bitwise equal.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace qflow::cuda::bn {

enum class Scalar { F32, F64 };

/// A (C,) tensor of the op (weight, bias, running stats, ...): data (null when absent) and
/// the element stride.
struct ChannelTensor {
  void* data = nullptr;
  int64_t stride = 1;
};

struct Layout {
  bool rows = false;  // rows layout [R, C]; else planes (N, C, S)
  int64_t R = 0;      // rows (rows layout)
  int64_t N = 0, C = 0, S = 1;  // planes layout; N * S == R in both
};

/// Bytes of scratch device memory the launchers below need for `layout` (pass the same
/// buffer to one forward or one backward call; stream order makes reuse safe).
size_t workspace_bytes(const Layout& layout, Scalar scalar);

struct ForwardArgs {
  Layout layout;
  Scalar scalar = Scalar::F32;
  const void* x = nullptr;
  void* y = nullptr;  // same layout as x
  ChannelTensor weight, bias, running_mean, running_var;
  void* save_mean = nullptr;    // (C,) contiguous, written
  void* save_invstd = nullptr;  // (C,) contiguous, written
  bool training = true;
  bool relu = false;
  double momentum = 0.1, eps = 1e-5;
  void* workspace = nullptr;
};
void forward(const ForwardArgs& a, cudaStream_t stream);

struct BackwardArgs {
  Layout layout;
  Scalar scalar = Scalar::F32;
  const void* x = nullptr;
  const void* dy = nullptr;        // null: no grad_output (only the statistics' gradients flow)
  const void* relu_out = nullptr;  // non-null: dy is masked where relu_out <= 0 (batch_norm_relu)
  void* dx = nullptr;              // same layout as x
  ChannelTensor weight, running_mean, running_var, save_mean, save_invstd, grad_mean, grad_invstd;
  void* grad_weight = nullptr;  // (C,) contiguous, written
  void* grad_bias = nullptr;    // (C,) contiguous, written
  bool train = true;
  double eps = 1e-5;
  void* workspace = nullptr;
};
void backward(const BackwardArgs& a, cudaStream_t stream);

}  // namespace qflow::cuda::bn
