#pragma once
// fake_quantize: the registered op that rounds a float tensor onto an integer grid and back
// (quantize + dequantize in one pass), with a straight-through-estimator backward.
//
// Note [Quantization numerics]
// b = bits; round = round half to even; everything in float32 (see QConfig for the options).
//   google, symmetric:  scale = max(|min|, |max|) / (2^(b-1) - 1),  zero_point = 0,
//                       grid [-2^(b-1), 2^(b-1) - 1]
//   google, affine:     the range is first widened to include 0 (min = min(min, 0), max =
//                       max(max, 0), as PyTorch's and TFLite's observers do), then
//                       scale = (max - min) / (2^b - 1),  zero_point = -round(min / scale),
//                       grid [0, 2^b - 1]. So 0 is exactly representable (zero padding, ReLU's
//                       zeros) and the zero point lies on the grid, which the integer kernels
//                       need (Note [Integer convolution]); a positive-only range starts at 0.
//   cambricon:          shift = floor(log2(max(|min|, |max|))) - (b - 2), scale = 2^shift,
//                       then as google symmetric.
//   fake quantization:  q = clamp(round(x / scale + zero_point), quant_min, quant_max),
//                       out = (q - zero_point) * scale.
// A zero range (scale 0: an all-zero tensor or channel, or an observer that has seen nothing)
// leaves the values unchanged, never NaN/Inf. Per-channel quantization uses one scale and
// zero_point per index of `axis` (axis 0, the output channel, for weights).
// Backward (straight-through estimator): pure passes grad_output unchanged; clipped zeroes it
// where round(x / scale + zero_point) fell outside [quant_min, quant_max]. scale and
// zero_point are statistics, not parameters: they receive no gradient.
#include <cstdint>

#include "qflow/core/tensor.h"

namespace qflow::quant {

/// Registered as "fake_quantize(Tensor self, Tensor scale, Tensor zero_point, int quant_min,
/// int quant_max, int axis=0, bool clipped_ste=False) -> Tensor".
/// self: float32/float64, any shape. scale/zero_point: 0-d or 1-d with equal element counts;
/// one element = per tensor, otherwise per channel along `axis` (then the count must equal
/// self.size(axis)). scale must be finite and >= 0; zero_point holds integers (any real dtype).
/// The output has self's shape and dtype. One vectorised, parallel pass.
Tensor fake_quantize(const Tensor& self, const Tensor& scale, const Tensor& zero_point, int64_t quant_min,
                     int64_t quant_max, int64_t axis = 0, bool clipped_ste = false);

/// The integers fake_quantize rounds to, q = clamp(round(x / scale + zero_point), quant_min,
/// quant_max), stored as `dtype` (uint8, int8 or int32; the grid must fit it): so
/// (q - zero_point) * scale equals fake_quantize(x) bit for bit. Registered as "quantize(Tensor
/// self, Tensor scale, Tensor zero_point, int quant_min, int quant_max, int axis=0, ScalarType
/// dtype=uint8) -> Tensor"; scale and zero_point as for fake_quantize, but every scale must be
/// positive (a zero range has no grid). Not differentiable: it starts an int8 model's layer.
Tensor quantize(const Tensor& self, const Tensor& scale, const Tensor& zero_point, int64_t quant_min,
                int64_t quant_max, int64_t axis = 0, DType dtype = DType::UInt8);

/// The clipped estimator's gradient: grad_output where quant_min <= round(self / scale +
/// zero_point) <= quant_max (or where the scale is 0), else 0. Registered as
/// "fake_quantize_backward(Tensor grad_output, Tensor self, Tensor scale, Tensor zero_point,
/// int quant_min, int quant_max, int axis=0) -> Tensor".
Tensor fake_quantize_backward(const Tensor& grad_output, const Tensor& self, const Tensor& scale,
                              const Tensor& zero_point, int64_t quant_min, int64_t quant_max, int64_t axis = 0);

}  // namespace qflow::quant

// The op is also part of the functional API: F::fake_quantize(x, scale, zero_point, ...).
namespace qflow::nn::functional {
using quant::fake_quantize;
}
