// Derivatives of core/kernels/conv.cpp: conv2d and conv2d_relu. The gradients come from the
// conv2d_backward op, which computes only the ones autograd asks for.
#include "qflow/autograd/derivatives.h"
#include "qflow/core/conv_ops.h"
#include "qflow/core/nn_ops.h"

namespace qflow::autograd {
namespace {

// Flat inputs: input, weight, bias (an undefined slot when None, so needs_grad(2) is false).
// Arguments: input, weight, bias, stride, padding, dilation, groups.
TensorList conv2d_backward_of(const BackwardContext& ctx, const Tensor& g) {
  auto [gi, gw, gb] = conv2d_backward(g, ctx.input(0), ctx.input(1), ctx.arg(3).int_list(), ctx.arg(4).int_list(),
                                      ctx.arg(5).int_list(), ctx.arg(6).to_int(), ctx.needs_grad(0), ctx.needs_grad(1),
                                      ctx.needs_grad(2));
  return {gi, gw, gb};
}

TensorList conv2d_backward_rule(const BackwardContext& ctx, const TensorList& g) { return conv2d_backward_of(ctx, g[0]); }

// relu's gradient from the saved output, then conv2d's.
TensorList conv2d_relu_backward_rule(const BackwardContext& ctx, const TensorList& g) {
  return conv2d_backward_of(ctx, threshold_backward(g[0], ctx.output(0), Scalar(0)));
}

}  // namespace

QFLOW_REGISTER_DERIVATIVES(conv) {
  registry.def("conv2d", {.node_name = "ConvolutionBackward", .save_inputs = save_inputs({0, 1}),
                          .backward = conv2d_backward_rule});
  registry.def("conv2d_relu", {.node_name = "ConvolutionReluBackward", .save_inputs = save_inputs({0, 1}),
                               .save_outputs = true, .backward = conv2d_relu_backward_rule});
}

}  // namespace qflow::autograd
