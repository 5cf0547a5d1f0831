// Derivatives of core/kernels/elementwise/activation.cpp: hardtanh, relu6, hardswish, hardsigmoid,
// leaky_relu, silu, each through its backward op on the saved input.
#include "qflow/autograd/derivatives.h"
#include "qflow/core/nn_ops.h"

namespace qflow::autograd {
namespace {

TensorList hardtanh_rule(const BackwardContext& ctx, const TensorList& g) {
  return {hardtanh_backward(g[0], ctx.input("self"), ctx.arg("min_val").to_double(), ctx.arg("max_val").to_double())};
}
// relu6 is hardtanh(0, 6), gradient included.
TensorList relu6_rule(const BackwardContext& ctx, const TensorList& g) {
  return {hardtanh_backward(g[0], ctx.input("self"), 0.0, 6.0)};
}
TensorList hardswish_rule(const BackwardContext& ctx, const TensorList& g) {
  return {hardswish_backward(g[0], ctx.input("self"))};
}
TensorList hardsigmoid_rule(const BackwardContext& ctx, const TensorList& g) {
  return {hardsigmoid_backward(g[0], ctx.input("self"))};
}
TensorList leaky_relu_rule(const BackwardContext& ctx, const TensorList& g) {
  return {leaky_relu_backward(g[0], ctx.input("self"), ctx.arg("negative_slope").to_double())};
}
TensorList silu_rule(const BackwardContext& ctx, const TensorList& g) {
  return {silu_backward(g[0], ctx.input("self"))};
}

}  // namespace

}  // namespace qflow::autograd

#include "autograd/derivatives/activation.derivatives.inc"
