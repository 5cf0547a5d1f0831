#pragma once
// A deployed layer's weight as the integers of its grid (Note [Deployed module layout] in
// deploy.h): the type they are stored in, the integers of a weight that lies on its grid, and
// the float weight they stand for, which the float simulation and a float exporter read.
// Internal to DConv2d and DLinear.
#include <cstdint>

#include "qflow/core/tensor.h"
#include "qflow/quant/qconfig.h"
#include "qflow/core/versioned_cache.h"

namespace qflow::quant::detail {

/// The smallest qflow type holding every integer of the weight grid [quant_min, quant_max]:
/// int8 (symmetric, up to 8 bits), uint8 (affine, up to 8 bits), int32 (wider grids: qflow has
/// no 16-bit integer type).
DType weight_integer_type(const QConfig& qconfig);

/// `values` (one per output channel, or one) shaped to broadcast over a weight of `dim`
/// dimensions: (O, 1, 1, ...), or 0-d for a single value.
Tensor per_output_channel(const Tensor& values, int64_t dim);

/// The integers of a float weight on its grid.
struct GridIntegers {
  Tensor integers;       // weight_integer_type(qconfig), the weight's shape; undefined when off the grid
  int64_t off_grid = -1; // the flat index of the first element no integer reproduces (-1: none)
};

/// The q with dequantize_weight(q, scale, zero_point) equal to `weight` element for element:
/// quantize's integers of a fake-quantized weight (scale and zero_point per output channel or
/// per tensor). Off the grid when some element is not exactly such a value: fake quantization
/// was off, or a channel of scale 0 (fake_quantize's identity) holds nonzero weights.
GridIntegers grid_integers(const Tensor& weight, const Tensor& scale, const Tensor& zero_point, const QConfig& qconfig);

/// (q - zero_point) * scale per output channel in scale's dtype — fake_quantize's own last
/// step, so the result equals the fake-quantized weight bit for bit. A floating `weight` (a
/// layer whose weight is not quantized) is returned as it is.
Tensor dequantize_weight(const Tensor& weight, const Tensor& scale, const Tensor& zero_point);

/// dequantize_weight of a layer's current tensors (contiguous), kept in `cache` and recomputed
/// only after one of them is written, in place or by a state_dict load (Note [Versioned
/// caches]). A floating `weight` is returned as it is.
const Tensor& cached_float_weight(VersionedCache<Tensor>& cache, const Tensor& weight, const Tensor& scale,
                                  const Tensor& zero_point);

}  // namespace qflow::quant::detail
