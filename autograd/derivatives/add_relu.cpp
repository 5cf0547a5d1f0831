// Derivative of core/kernels/elementwise/add_relu.cpp: relu's gradient (from the saved output) reaches
// both inputs; broadcast inputs get it summed back to their shape by the engine.
#include "qflow/autograd/derivatives.h"
#include "qflow/core/nn_ops.h"

namespace qflow::autograd {
namespace {

TensorList add_relu_backward(const BackwardContext& ctx, const TensorList& g) {
  const Tensor masked = threshold_backward(g[0], ctx.output(0), Scalar(0));
  return {masked, masked};
}

}  // namespace

}  // namespace qflow::autograd

#include "autograd/derivatives/add_relu.derivatives.inc"
