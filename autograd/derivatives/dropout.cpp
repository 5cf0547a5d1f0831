// Derivatives of core/kernels/nn/dropout.cpp: native_dropout differentiates through its saved
// mask (see Note [Dropout keeps its mask]).
#include "qflow/autograd/derivatives.h"
#include "qflow/core/nn_ops.h"

namespace qflow::autograd {
namespace {

// Output 1 is the bool mask (it carries no gradient).
TensorList native_dropout_rule(const BackwardContext& ctx, const TensorList& g) {
  if (!g[0].defined()) return {Tensor()};
  const double p = ctx.arg("p").to_double();
  if (!ctx.arg("train").to_bool() || p == 0.0) return {g[0]};  // the identity
  const double scale = p == 1.0 ? 0.0 : 1.0 / (1.0 - p);
  return {native_dropout_backward(g[0], ctx.output(1), scale)};
}

}  // namespace

}  // namespace qflow::autograd

#include "autograd/derivatives/dropout.derivatives.inc"
