#pragma once
// float32 convolution through oneDNN: forward, backward data and backward weights, with
// primitives, reorders and reordered weights cached. See Note [oneDNN convolution].
#include "kernels/conv/im2col.h"
#include "qflow/core/tensor.h"

namespace qflow::kernels::onednn {

/// True when conv2d of this geometry and dtype runs on oneDNN under the current settings
/// (conv_engine() == OneDNN, float32, a batch of at least one image). Everything else takes
/// the im2col + OpenBLAS path (see Note [Convolution as GEMM]).
bool handles(const ConvGeometry& g, DType dtype);

/// x: (N, C, H, W), w: (O, C / groups, kH, kW), bias: (O,) or undefined → y: (N, O, Ho, Wo).
/// Plain contiguous float32 tensors in and out. With `relu`, y = relu(conv(x)) through a
/// oneDNN post-op (no second pass over y).
Tensor conv2d_forward(const ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias, bool relu = false);
/// gy: (N, O, Ho, Wo), w → gx: (N, C, H, W).
Tensor conv2d_backward_data(const ConvGeometry& g, const Tensor& gy, const Tensor& w);
/// gy, x → gw: like w, and gb: (O,) when `want_bias` (else undefined).
std::pair<Tensor, Tensor> conv2d_backward_weights(const ConvGeometry& g, const Tensor& gy, const Tensor& x,
                                                  bool want_bias);

/// The algorithm the forward pass of `g` runs with under the current settings.
bool uses_winograd(const ConvGeometry& g);

}  // namespace qflow::kernels::onednn
