#pragma once
// The integer form of a deployed layer (DConv2d, DLinear): what its integer kernel needs,
// computed from the layer's tensors and cached until one of them is written (a
// state_dict load writes them in place). Internal to DConv2d and DLinear; see Note [Integer
// activations] in deploy.h.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "qflow/core/conv_ops.h"
#include "qflow/quant/qconfig.h"
#include "qflow/core/versioned_cache.h"

namespace qflow::quant::detail {

/// The tensors of a deployed layer (Note [Deployed module layout]).
struct DeployedTensors {
  const Tensor& weight;  // the grid integers (int8 where the integer kernels run), or float
  const Tensor& bias;    // float32 or undefined
  const Tensor& input_scale;
  const Tensor& input_zero_point;
  const Tensor& weight_scale;
  const Tensor& weight_zero_point;
};

/// The grid a layer's output is requantized onto: the next integer layer's input qparams, as
/// tensors shared with that layer.
struct OutputGrid {
  Tensor scale, zero_point;
  QConfig qconfig;  // the next layer's activations() (Note [Weight and activation bits])
};

/// Why a layer with these tensors cannot run in integers ("" when it can): more than 8 bits,
/// a zero scale, a weight zero point, weights that are not int8.
std::string integer_unsupported(const DeployedTensors& t, const QConfig& qconfig);

/// The integer type of a layer's quantized input: uint8 for affine grids, int8 for symmetric.
DType input_integer_type(const QConfig& qconfig);

struct IntegerForm {
  std::string unsupported;  // why the layer runs the float simulation ("" = integers)
  Tensor weight;            // int8 grid values, the float weight's shape
  Tensor output_scale;      // s_x * s_w, divided by the output grid's scale when requantizing
  Tensor bias;              // the float bias, in the same units
  int64_t input_zero_point = 0;
  QuantizedOutput output;   // float32, or the output grid
};

/// The form for the layer's current tensors, kept in `cache` until one of them (or of the output
/// grid's) is written (Note [Versioned caches]); `layer_unsupported` is a reason of the layer's
/// own (padding="same"), checked first.
const IntegerForm& cached_integer_form(VersionedCache<IntegerForm>& cache, const DeployedTensors& t,
                                       const QConfig& qconfig, const std::optional<OutputGrid>& grid,
                                       const std::string& layer_unsupported);

}  // namespace qflow::quant::detail
