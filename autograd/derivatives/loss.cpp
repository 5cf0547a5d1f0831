// Derivatives of core/kernels/loss.cpp. Class-index losses differentiate w.r.t. their input
// only (targets are indices; like PyTorch, a weight that requires grad is refused); mse and
// l1 also w.r.t. target (the negated input gradient).
#include "qflow/autograd/derivatives.h"
#include "qflow/core/nn_ops.h"
#include "qflow/core/ops.h"

namespace qflow::autograd {
namespace {

Tensor maybe(const BackwardContext& ctx, size_t i) { return ctx.has_input(i) ? ctx.input(i) : Tensor(); }
Reduction reduction_arg(const BackwardContext& ctx, size_t i) { return static_cast<Reduction>(ctx.arg(i).to_int()); }

// Flat inputs: self, target, weight. Arguments: ..., reduction (3), ignore_index (4)[, label_smoothing (5)].
TensorList nll_loss_rule(const BackwardContext& ctx, const TensorList& g) {
  QFLOW_CHECK(!ctx.needs_grad(2), "nll_loss: the derivative for 'weight' is not implemented");
  return {nll_loss_backward(g[0], ctx.input(0), ctx.input(1), maybe(ctx, 2), reduction_arg(ctx, 3), ctx.arg(4).to_int()),
          Tensor(), Tensor()};
}

TensorList cross_entropy_rule(const BackwardContext& ctx, const TensorList& g) {
  QFLOW_CHECK(!ctx.needs_grad(2), "cross_entropy: the derivative for 'weight' is not implemented");
  return {cross_entropy_backward(g[0], ctx.input(0), ctx.input(1), maybe(ctx, 2), reduction_arg(ctx, 3),
                                 ctx.arg(4).to_int(), ctx.arg(5).to_double()),
          Tensor(), Tensor()};
}

template <Tensor (*Backward)(const Tensor&, const Tensor&, const Tensor&, Reduction)>
TensorList pointwise_rule(const BackwardContext& ctx, const TensorList& g) {
  const Tensor gx = Backward(g[0], ctx.input(0), ctx.input(1), reduction_arg(ctx, 2));
  return {gx, ctx.needs_grad(1) ? mul(gx, Scalar(-1.0)) : Tensor()};
}

}  // namespace

QFLOW_REGISTER_DERIVATIVES(loss) {
  registry.def("nll_loss", {.node_name = "NllLossBackward", .save_inputs = kSaveAll, .backward = nll_loss_rule});
  registry.def("cross_entropy", {.node_name = "CrossEntropyLossBackward", .save_inputs = kSaveAll,
                                 .backward = cross_entropy_rule});
  registry.def("mse_loss", {.node_name = "MseLossBackward", .save_inputs = kSaveAll,
                            .backward = pointwise_rule<mse_loss_backward>});
  registry.def("l1_loss", {.node_name = "L1LossBackward", .save_inputs = kSaveAll,
                           .backward = pointwise_rule<l1_loss_backward>});
}

}  // namespace qflow::autograd
