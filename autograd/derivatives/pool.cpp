// Derivatives of core/kernels/nn/pool.cpp: max_pool2d, max_pool2d_with_indices, avg_pool2d,
// adaptive_avg_pool2d. The backward ops themselves have no derivative (no double backward).
#include "qflow/autograd/derivatives.h"
#include "qflow/core/conv_ops.h"

namespace qflow::autograd {
namespace {

// max_pool2d keeps no indices, so its backward recomputes the argmax from the saved input:
// one more pooling pass instead of an int64 tensor per output kept alive until backward.
TensorList max_pool2d_backward_rule(const BackwardContext& ctx, const TensorList& g) {
  const Tensor& x = ctx.input("self");
  const auto stride = ctx.arg("stride").int_list(), padding = ctx.arg("padding").int_list();
  const auto dilation = ctx.arg("dilation").int_list();
  const IntList kernel = ctx.arg("kernel_size").int_list();
  const bool ceil_mode = ctx.arg("ceil_mode").to_bool();
  Tensor indices = std::get<1>(max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil_mode));
  return {max_pool2d_with_indices_backward(g[0], x, kernel, stride, padding, dilation, ceil_mode, indices)};
}

TensorList max_pool2d_with_indices_backward_rule(const BackwardContext& ctx, const TensorList& g) {
  if (!g[0].defined()) return {Tensor()};  // only the indices were used
  return {max_pool2d_with_indices_backward(g[0], ctx.input("self"), ctx.arg("kernel_size").int_list(),
                                           ctx.arg("stride").int_list(), ctx.arg("padding").int_list(),
                                           ctx.arg("dilation").int_list(), ctx.arg("ceil_mode").to_bool(),
                                           ctx.output(1))};
}

TensorList avg_pool2d_backward_rule(const BackwardContext& ctx, const TensorList& g) {
  return {avg_pool2d_backward(g[0], ctx.input("self"), ctx.arg("kernel_size").int_list(), ctx.arg("stride").int_list(),
                              ctx.arg("padding").int_list(), ctx.arg("ceil_mode").to_bool(),
                              ctx.arg("count_include_pad").to_bool(), ctx.arg("divisor_override").optional_int())};
}

TensorList adaptive_avg_pool2d_backward_rule(const BackwardContext& ctx, const TensorList& g) {
  return {adaptive_avg_pool2d_backward(g[0], ctx.input("self"))};
}

}  // namespace

}  // namespace qflow::autograd

#include "autograd/derivatives/pool.derivatives.inc"
