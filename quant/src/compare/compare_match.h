#pragma once
// Which float node each quantized node is compared with: the matching rule of
// Note [Numeric debugger] (compare.h).
#include <string>
#include <unordered_map>
#include <vector>

#include "qflow/fx/graph_module.h"

namespace qflow::quant::detail {

struct NodeMatching {
  /// Quantized node -> its float reference, for every matched node (placeholders and
  /// get_attr included: the lockstep run feeds them like any input).
  std::unordered_map<const fx::Node*, const fx::Node*> reference;
  /// The quantized nodes that become rows, in graph order (call_module/function/method).
  std::vector<const fx::Node*> rows;
  /// "%relu_17: only in the quantized model", "%bn9: only in the float model".
  std::vector<std::string> skipped;
};

/// Matches `quantized` against `float_model` by node name, follows folded nodes, and checks
/// that matched nodes do the same thing; throws naming the node when they do not.
NodeMatching match_nodes(const fx::GraphModule& float_model, const fx::GraphModule& quantized);

/// "QConvBN (layer1.0.conv1)" for a call_module node, the target otherwise.
std::string node_what(const fx::GraphModule& gm, const fx::Node& n);

}  // namespace qflow::quant::detail
