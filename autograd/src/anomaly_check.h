#pragma once
// The checks autograd runs while anomaly detection is on; see Note [Anomaly detection].
#include <string_view>
#include <vector>

#include "qflow/autograd/node.h"
#include "qflow/core/op_registry.h"

namespace qflow::autograd::detail {

/// Throws when a floating output of `op` holds NaN or Inf, saying whether an input already did.
void check_forward_outputs(std::string_view op, const TensorList& inputs, const Stack& outputs);
/// Throws when a gradient `node` returned holds NaN or Inf (`grads[i]` goes to next edge i).
void check_backward_outputs(const Node& node, const std::vector<Tensor>& grads);
/// Throws when a gradient given to backward() for root `i` holds NaN or Inf.
void check_root_gradient(size_t i, const Tensor& grad);

}  // namespace qflow::autograd::detail
