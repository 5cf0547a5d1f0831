// Derivatives of core/kernels/nn/norm.cpp: batch_norm and native_batch_norm, both through the
// native_batch_norm_backward op (see Note [Batch norm saves no statistics]), and
// batch_norm_relu through its fused backward.
#include "qflow/autograd/derivatives.h"
#include "qflow/core/nn_ops.h"

namespace qflow::autograd {
namespace {

// The running statistics carry no gradient (they are buffers); in training they are not even
// read, so updating them again in a later forward does not invalidate this node.
struct RunningStats {
  Tensor mean, var;
};
RunningStats running_stats(const BackwardContext& ctx, bool training) {
  if (training) return {};
  return {ctx.input_or_none("running_mean"), ctx.input_or_none("running_var")};
}

TensorList batch_norm_rule(const BackwardContext& ctx, const TensorList& g) {
  const bool training = ctx.arg("training").to_bool();
  const RunningStats stats = running_stats(ctx, training);
  auto [gx, gw, gb] = native_batch_norm_backward(g[0], ctx.input("input"), ctx.input_or_none("weight"), stats.mean,
                                                 stats.var, Tensor(), Tensor(), training, ctx.arg("eps").to_double());
  return ctx.gradients({{"input", gx}, {"weight", gw}, {"bias", gb}});
}

// Outputs: (y, mean, invstd); gradients reaching mean and invstd flow into the input too.
TensorList native_batch_norm_rule(const BackwardContext& ctx, const TensorList& g) {
  const bool training = ctx.arg("training").to_bool();
  const RunningStats stats = running_stats(ctx, training);
  auto [gx, gw, gb] =
      native_batch_norm_backward(g[0], ctx.input("input"), ctx.input_or_none("weight"), stats.mean, stats.var,
                                 ctx.output(1), ctx.output(2), training, ctx.arg("eps").to_double(), g[1], g[2]);
  return ctx.gradients(
      {{"input", gx}, {"weight", g[0].defined() ? gw : Tensor()}, {"bias", g[0].defined() ? gb : Tensor()}});
}

// batch_norm_relu: one fused backward masks with the saved output (Note [Batch norm fused
// with ReLU] in core/kernels/nn/norm.cpp). Saved: input, weight, running stats (eval) and output.
TensorList batch_norm_relu_rule(const BackwardContext& ctx, const TensorList& g) {
  const bool training = ctx.arg("training").to_bool();
  const RunningStats stats = running_stats(ctx, training);
  auto [gx, gw, gb] = batch_norm_relu_backward(g[0], ctx.output(0), ctx.input("input"), ctx.input_or_none("weight"),
                                               stats.mean, stats.var, training, ctx.arg("eps").to_double());
  return ctx.gradients({{"input", gx}, {"weight", gw}, {"bias", gb}});
}

}  // namespace

}  // namespace qflow::autograd

#include "autograd/derivatives/norm.derivatives.inc"
