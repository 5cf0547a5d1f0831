#pragma once
// Integer convolution through oneDNN (u8/s8 activations × s8 weights, int32 sums, VNNI where
// the CPU has it): the kernel of quantized_conv2d. See Note [Integer convolution].
#include <vector>

#include "kernels/conv/im2col.h"
#include "qflow/core/conv_ops.h"

namespace qflow::kernels::onednn {

/// True when quantized_conv2d of this geometry runs on oneDNN: conv_engine() == OneDNN, a batch
/// of at least one image, every output scale positive (oneDNN takes the bias divided by it).
/// Grouped and depthwise layers included (oneDNN's (G, O/G, C/G, kH, kW) weights).
bool handles_int8(const ConvGeometry& g, const std::vector<float>& output_scale);

/// x: (N, C, H, W) uint8 or int8 (plain, or in the primitive's nhwc layout), w: (O, C, kH, kW)
/// int8 (plain), output_scale (O values), bias (O,) float32 or undefined, add: undefined or
/// float32 of the output's sizes (any layout) →
///   y = output_scale[o] * sum((x - zero_point) * w) + bias[o] (+ add), then relu when asked;
/// float32, or clamp(round(y) + zero_point, min, max) for integer outputs, in the primitive's
/// layout (nhwc: Note [Integer activations]) unless conv_keeps_blocked_layout() is off.
Tensor conv2d_int8(const ConvGeometry& g, const Tensor& x, int64_t zero_point, const Tensor& w,
                   const std::vector<float>& output_scale, const Tensor& bias, bool relu, const Tensor& add,
                   const QuantizedOutput& output);

/// acc = acc + (the float32 result above without `add`), then relu when asked, written into acc
/// by oneDNN's sum post-op — the direct (brgemm) kernels take it where they refuse a full-tensor
/// binary add. Only when acc is float32 in the primitive's destination layout (nhwc: what a
/// float32 conv2d_int8 returns); returns false, touching nothing, otherwise.
bool conv2d_int8_accumulate(const ConvGeometry& g, const Tensor& x, int64_t zero_point, const Tensor& w,
                            const std::vector<float>& output_scale, const Tensor& bias, bool relu, Tensor& acc);

}  // namespace qflow::kernels::onednn
