#pragma once
// Quantization parameters from observed ranges, and fake quantization driven by a QConfig.
#include <cstdint>
#include <utility>

#include "qflow/core/tensor.h"
#include "qflow/quant/qconfig.h"

namespace qflow::quant {

/// scale and zero_point of one tensor (1 element) or of each channel along `axis` (C
/// elements). float32, never requiring grad. A scale of 0 marks an empty range: fake
/// quantization with it is the identity.
struct QParams {
  Tensor scale;
  Tensor zero_point;
  int64_t axis = 0;

  /// True when there is one scale per channel.
  bool per_channel() const { return scale.numel() > 1; }
};

/// The scale and zero_point of Note [Quantization numerics] for ranges [min, max]: `min` and
/// `max` have equal shapes, 0-d/(1) per tensor or (C) per channel, any floating dtype (read
/// in float32). Throws when min > max or a bound is not finite. The qparams have min's shape
/// (0-d becomes (1)) and carry no autograd history.
QParams compute_qparams(const Tensor& min, const Tensor& max, const QConfig& qconfig, int64_t axis = 0);

/// The op behind compute_qparams ("choose_qparams(Tensor min, Tensor max, int bits, bool
/// symmetric, bool cambricon) -> (Tensor, Tensor)"): float32 (C) ranges to float32 (C) scales
/// and zero points on the ranges' device, no host round trip on a GPU (where, unlike the CPU,
/// an invalid range is not reported: it gives a NaN or infinite scale).
std::pair<Tensor, Tensor> choose_qparams(const Tensor& min, const Tensor& max, const QConfig& qconfig);

/// One range's (scale, zero_point) by the same formulas, in float32: what compute_qparams
/// computes per element.
std::pair<float, float> range_qparams(float min, float max, const QConfig& qconfig);

/// The range statistics a weight observer records: per tensor ((1) each) or, with
/// `per_channel`, one (min, max) per index of axis 0 ((C) each). Detached float32.
struct Range {
  Tensor min;
  Tensor max;
};
Range tensor_range(const Tensor& x, bool per_channel);

/// fake_quantize(x, qparams.scale, qparams.zero_point, qconfig's grid, qparams.axis,
/// qconfig.ste == Clipped): the F-style entry modules use.
Tensor fake_quantize(const Tensor& x, const QParams& qparams, const QConfig& qconfig);

}  // namespace qflow::quant
