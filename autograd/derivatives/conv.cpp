// Derivatives of core/kernels/conv/conv.cpp: conv2d and conv2d_relu. The gradients come from the
// conv2d_backward op, which computes only the ones autograd asks for.
#include "qflow/autograd/derivatives.h"
#include "qflow/core/conv_ops.h"
#include "qflow/core/nn_ops.h"

namespace qflow::autograd {
namespace {

// A bias given as None has an undefined slot, so needs_grad("bias") is false.
TensorList conv2d_backward_of(const BackwardContext& ctx, const Tensor& g) {
  auto [gi, gw, gb] = conv2d_backward(g, ctx.input("input"), ctx.input("weight"), ctx.arg("stride").int_list(),
                                      ctx.arg("padding").int_list(), ctx.arg("dilation").int_list(),
                                      ctx.arg("groups").to_int(), ctx.needs_grad("input"), ctx.needs_grad("weight"),
                                      ctx.needs_grad("bias"));
  return ctx.gradients({{"input", gi}, {"weight", gw}, {"bias", gb}});
}

TensorList conv2d_backward_rule(const BackwardContext& ctx, const TensorList& g) { return conv2d_backward_of(ctx, g[0]); }

// relu's gradient from the saved output, then conv2d's.
TensorList conv2d_relu_backward_rule(const BackwardContext& ctx, const TensorList& g) {
  return conv2d_backward_of(ctx, threshold_backward(g[0], ctx.output(0), Scalar(0)));
}

}  // namespace

}  // namespace qflow::autograd

#include "autograd/derivatives/conv.derivatives.inc"
