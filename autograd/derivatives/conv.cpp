// Derivatives of core/kernels/conv.cpp: conv2d. The gradients come from the conv2d_backward
// op, which computes only the ones autograd asks for.
#include "qflow/autograd/derivatives.h"
#include "qflow/core/conv_ops.h"

namespace qflow::autograd {
namespace {

// Flat inputs: input, weight, bias (an undefined slot when None, so needs_grad(2) is false).
// Arguments: input, weight, bias, stride, padding, dilation, groups.
TensorList conv2d_backward_rule(const BackwardContext& ctx, const TensorList& g) {
  auto [gi, gw, gb] = conv2d_backward(g[0], ctx.input(0), ctx.input(1), ctx.arg(3).int_list(), ctx.arg(4).int_list(),
                                      ctx.arg(5).int_list(), ctx.arg(6).to_int(), ctx.needs_grad(0), ctx.needs_grad(1),
                                      ctx.needs_grad(2));
  return {gi, gw, gb};
}

}  // namespace

QFLOW_REGISTER_DERIVATIVES(conv) {
  registry.def("conv2d", {.node_name = "ConvolutionBackward", .save_inputs = save_inputs({0, 1}),
                          .backward = conv2d_backward_rule});
}

}  // namespace qflow::autograd
