#pragma once
// Quantization info on graph nodes, for fx::to_dot and anyone reading a rewritten graph.
//
// Note [Quant node meta]
// Every call_module node running a QConv2d, QLinear, QConvBN, DConv2d or DLinear carries
//   quant.bits         8                          (number)
//   quant.scheme       symmetric | affine
//   quant.formula      google | cambricon
//   quant.granularity  per-layer | per-channel    (of the weights; activations are per tensor)
// and, once they are known (a Q module whose observers have recorded, or any D module):
//   quant.input_scale       the activation scale (number)
//   quant.input_zero_point  affine only (number)
//   quant.weight_scale      a number per layer; "lo..hi (C ch)" per channel
// A Q module with fake quantization switched off shows quant.fake_quant=off instead of scales.
// A DConv2d/DLinear also says which kernel it runs (Note [Integer activations]):
//   quant.kernel       int8 | float
//   dot.caption        "runs int8", or "runs float: <why>" (integer_unsupported(), or
//                      integer=False when switched off)
//   dot.fillcolor      green for int8, orange for float
// fx::to_dot prints these entries on the node and draws it with a thick red border, filled in
// its kernel's colour.
#include <cstdint>

#include "qflow/fx/graph_module.h"

namespace qflow::quant {

/// Rewrites the "quant.*" meta of every node of `gm` (stale entries of other nodes are
/// removed) from the modules' current state; returns the number of quantized nodes.
/// Call it again after training or calibration to show the scales.
int64_t annotate_quant_meta(fx::GraphModule& gm);

}  // namespace qflow::quant
