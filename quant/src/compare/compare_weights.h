#pragma once
// The two weights the numeric debugger compares for a quantized layer (Note [Numeric
// debugger] in compare.h).
#include "qflow/fx/graph_module.h"

namespace qflow::quant::detail {

/// The weight `layer` computes with: the fake-quantized weight of a QConv2d, QConvBN (BN
/// folded) or QLinear, the dequantized integers of a DConv2d or DLinear; undefined for any
/// other module. Throws (as the deploy factories do) for a Q module whose observers never
/// recorded.
Tensor quantized_weight(const nn::Module& layer);

/// The float weight behind quantized layer `q`: the weight of the module the float node
/// `float_node` calls, with a BatchNorm2d folded in (fx::fuse_conv_bn_eval) when the chain of
/// folded nodes from `float_node` to `reference` holds one.
Tensor reference_weight(const fx::GraphModule& float_model, const fx::Node& float_node, const fx::Node& reference);

}  // namespace qflow::quant::detail
