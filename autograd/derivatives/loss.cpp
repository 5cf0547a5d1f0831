// Derivatives of core/kernels/nn/loss.cpp. Class-index losses differentiate w.r.t. their input
// only (targets are indices; like PyTorch, a weight that requires grad is refused); mse and
// l1 also w.r.t. target (the negated input gradient).
#include "qflow/autograd/derivatives.h"
#include "qflow/core/nn_ops.h"
#include "qflow/core/ops.h"

namespace qflow::autograd {
namespace {

Reduction reduction_arg(const BackwardContext& ctx) { return static_cast<Reduction>(ctx.arg("reduction").to_int()); }

TensorList nll_loss_rule(const BackwardContext& ctx, const TensorList& g) {
  QFLOW_CHECK(!ctx.needs_grad("weight"), "nll_loss: the derivative for 'weight' is not implemented");
  return ctx.gradients({{"self", nll_loss_backward(g[0], ctx.input("self"), ctx.input("target"), ctx.input_or_none("weight"),
                                                   reduction_arg(ctx), ctx.arg("ignore_index").to_int())}});
}

TensorList cross_entropy_rule(const BackwardContext& ctx, const TensorList& g) {
  QFLOW_CHECK(!ctx.needs_grad("weight"), "cross_entropy: the derivative for 'weight' is not implemented");
  return ctx.gradients(
      {{"self", cross_entropy_backward(g[0], ctx.input("self"), ctx.input("target"), ctx.input_or_none("weight"),
                                       reduction_arg(ctx), ctx.arg("ignore_index").to_int(),
                                       ctx.arg("label_smoothing").to_double())}});
}

template <Tensor (*Backward)(const Tensor&, const Tensor&, const Tensor&, Reduction)>
TensorList pointwise_rule(const BackwardContext& ctx, const TensorList& g) {
  const Tensor gx = Backward(g[0], ctx.input("self"), ctx.input("target"), reduction_arg(ctx));
  return ctx.gradients({{"self", gx}, {"target", ctx.needs_grad("target") ? mul(gx, Scalar(-1.0)) : Tensor()}});
}

}  // namespace

}  // namespace qflow::autograd

#include "autograd/derivatives/loss.derivatives.inc"
