// Derivatives of core/kernels/elementwise/unary.cpp. exp, sqrt, rsqrt, sigmoid and tanh differentiate
// through their saved output (cheaper than recomputing, and what PyTorch does).
#include "qflow/autograd/derivatives.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"

namespace qflow::autograd {
namespace {

TensorList neg_backward(const BackwardContext&, const TensorList& g) { return {neg(g[0])}; }
// d|x|/dx = sign(x), 0 at x = 0 (PyTorch's subgradient choice).
TensorList abs_backward(const BackwardContext& ctx, const TensorList& g) { return {mul(g[0], sign(ctx.input("self")))}; }
TensorList exp_backward(const BackwardContext& ctx, const TensorList& g) { return {mul(g[0], ctx.output(0))}; }
TensorList log_backward(const BackwardContext& ctx, const TensorList& g) { return {div(g[0], ctx.input("self"))}; }
// d sqrt(x)/dx = 1 / (2 sqrt(x))
TensorList sqrt_backward(const BackwardContext& ctx, const TensorList& g) {
  return {div(g[0], mul(ctx.output(0), Scalar(2.0)))};
}
// d x^(-1/2)/dx = -1/2 x^(-3/2) = -1/2 out^3
TensorList rsqrt_backward(const BackwardContext& ctx, const TensorList& g) {
  return {mul(mul(g[0], pow(ctx.output(0), Scalar(3))), Scalar(-0.5))};
}
// sigmoid' = s (1 - s)
TensorList sigmoid_backward(const BackwardContext& ctx, const TensorList& g) {
  const Tensor& s = ctx.output(0);
  return {mul(g[0], mul(s, rsub(s, Scalar(1))))};
}
// tanh' = 1 - tanh^2
TensorList tanh_backward(const BackwardContext& ctx, const TensorList& g) {
  const Tensor& t = ctx.output(0);
  return {mul(g[0], rsub(mul(t, t), Scalar(1)))};
}
// sign, round and floor are piecewise constant: zero gradient almost everywhere, which is
// what PyTorch returns (instead of refusing them as non-differentiable).
TensorList zero_backward(const BackwardContext&, const TensorList& g) { return {zeros_like(g[0])}; }

}  // namespace

}  // namespace qflow::autograd

#include "autograd/derivatives/unary.derivatives.inc"
