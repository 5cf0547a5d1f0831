#pragma once
// The backward engine: single-threaded and iterative (dependency counts + a ready queue,
// no recursion), so a 10,000-op chain runs in constant stack depth.
#include <vector>

#include "qflow/core/tensor.h"

namespace qflow::autograd {

/// Backpropagates from `roots` (with `grads`, or ones for scalar roots), accumulating into
/// the `.grad` of every leaf that requires grad.
void backward(const TensorList& roots, const TensorList& grads = {}, bool retain_graph = false);

/// Gradients of `outputs` w.r.t. `inputs` without touching any `.grad` (torch.autograd.grad).
TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs = {},
                bool retain_graph = false, bool allow_unused = false);

}  // namespace qflow::autograd
