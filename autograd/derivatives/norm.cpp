// Derivatives of core/kernels/norm.cpp: batch_norm and native_batch_norm, both through the
// native_batch_norm_backward op (see Note [Batch norm saves no statistics]), and
// batch_norm_relu through its fused backward.
#include "qflow/autograd/derivatives.h"
#include "qflow/core/nn_ops.h"

namespace qflow::autograd {
namespace {

// Flat inputs: input, weight, bias, running_mean, running_var (None slots stay undefined).
// Arguments: ..., training (5), momentum (6), eps (7). The running statistics carry no
// gradient (they are buffers); in training they are not even read, so updating them again
// in a later forward does not invalidate this node.
Tensor maybe(const BackwardContext& ctx, size_t i) { return ctx.has_input(i) ? ctx.input(i) : Tensor(); }

TensorList batch_norm_rule(const BackwardContext& ctx, const TensorList& g) {
  const bool training = ctx.arg(5).to_bool();
  const Tensor running_mean = training ? Tensor() : ctx.input(3);
  const Tensor running_var = training ? Tensor() : ctx.input(4);
  auto [gx, gw, gb] = native_batch_norm_backward(g[0], ctx.input(0), maybe(ctx, 1), running_mean, running_var, Tensor(),
                                                 Tensor(), training, ctx.arg(7).to_double());
  return {gx, gw, gb, Tensor(), Tensor()};
}

// Outputs: (y, mean, invstd); gradients reaching mean and invstd flow into the input too.
TensorList native_batch_norm_rule(const BackwardContext& ctx, const TensorList& g) {
  const bool training = ctx.arg(5).to_bool();
  const Tensor running_mean = training ? Tensor() : ctx.input(3);
  const Tensor running_var = training ? Tensor() : ctx.input(4);
  auto [gx, gw, gb] =
      native_batch_norm_backward(g[0], ctx.input(0), maybe(ctx, 1), running_mean, running_var, ctx.output(1),
                                 ctx.output(2), training, ctx.arg(7).to_double(), g[1], g[2]);
  return {gx, g[0].defined() ? gw : Tensor(), g[0].defined() ? gb : Tensor(), Tensor(), Tensor()};
}

// batch_norm_relu: one fused backward masks with the saved output (Note [Batch norm fused
// with ReLU] in core/kernels/norm.cpp). Saved: input, weight, running stats (eval) and output.
TensorList batch_norm_relu_rule(const BackwardContext& ctx, const TensorList& g) {
  const bool training = ctx.arg(5).to_bool();
  const Tensor running_mean = training ? Tensor() : ctx.input(3);
  const Tensor running_var = training ? Tensor() : ctx.input(4);
  auto [gx, gw, gb] = batch_norm_relu_backward(g[0], ctx.output(0), ctx.input(0), maybe(ctx, 1), running_mean,
                                               running_var, training, ctx.arg(7).to_double());
  return {gx, gw, gb, Tensor(), Tensor()};
}

}  // namespace

QFLOW_REGISTER_DERIVATIVES(norm) {
  registry.def("batch_norm_relu", {.node_name = "BatchNormReluBackward", .save_inputs = save_inputs({0, 1, 3, 4}),
                                   .save_outputs = true, .backward = batch_norm_relu_rule});
  registry.def("batch_norm", {.node_name = "NativeBatchNormBackward", .save_inputs = save_inputs({0, 1, 3, 4}),
                              .backward = batch_norm_rule});
  registry.def("native_batch_norm", {.node_name = "NativeBatchNormBackward", .save_inputs = save_inputs({0, 1, 3, 4}),
                                     .save_outputs = true, .backward = native_batch_norm_rule});
}

}  // namespace qflow::autograd
