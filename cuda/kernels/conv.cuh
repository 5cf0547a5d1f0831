#pragma once
// Launchers of the convolutions' own device code (cuda/kernels/conv.cu): the layout transposes
// between NCHW and channels-last (activations and filters), the bias + ReLU epilogue of the
// forward, and the bias gradient. Plain header (Note [CUDA kernel files]); the convolutions
// themselves are cuDNN's, driven by cuda/kernels/conv_ops.cpp (Note [cuDNN convolutions]).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace qflow::cuda::conv {

/// The element type of a launch: the convolutions take float32 and float64.
enum class Elem { F32, F64 };

/// out[b, s, r] = in[b, r, s] for b < batch, r < rows, s < cols; both dense. NCHW → NHWC is
/// (batch N, rows C, cols H W); NHWC → NCHW is (N, H W, C); an OIHW filter → OHWI is
/// (O, C / groups, kH kW). Tiled through shared memory: reads and writes are both coalesced.
void launch_transpose(Elem elem, const void* in, void* out, int64_t batch, int64_t rows, int64_t cols,
                      cudaStream_t stream);

/// In place on y seen as (outer, channels, inner), dense: y = relu?(y + bias[c]). bias may be
/// null (ReLU only); inner == 1 for channels-last activations (c fastest), H W for NCHW.
/// ReLU is `x < 0 ? 0 : x` like the CPU's relu_fn (NaN propagates).
void launch_bias_act(Elem elem, void* y, const void* bias, bool relu, int64_t outer, int64_t channels, int64_t inner,
                     cudaStream_t stream);

/// Bytes of scratch memory launch_bias_grad needs for this shape (per-block partial sums).
size_t bias_grad_workspace_bytes(Elem elem, int64_t outer, int64_t channels, int64_t inner);

/// gb[c] = sum over (o, i) of gy[o, c, i], gy dense (outer, channels, inner) as above; gb
/// (channels,) contiguous. Deterministic: per-block partial sums in a fixed order, then one
/// small kernel adds each channel's partials in order (no atomics). `workspace` holds at
/// least bias_grad_workspace_bytes(...) bytes.
void launch_bias_grad(Elem elem, const void* gy, void* gb, int64_t outer, int64_t channels, int64_t inner,
                      void* workspace, cudaStream_t stream);

}  // namespace qflow::cuda::conv
