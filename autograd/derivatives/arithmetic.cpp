// Derivatives of core/kernels/elementwise/arithmetic.cpp: add, sub, mul, div (+ scalar and reflected forms).
// Broadcast gradients are summed back to each input's shape by the engine.
#include "qflow/autograd/derivatives.h"
#include "qflow/core/ops.h"

namespace qflow::autograd {
namespace {

// With alpha = 1 (every residual connection) both inputs get the incoming gradient itself:
// no pass over it, and a blocked gradient stays blocked (Note [Opaque layouts]).
TensorList add_backward(const BackwardContext& ctx, const TensorList& g) {
  if (!ctx.needs_grad("other")) return ctx.gradients({{"self", g[0]}});
  const Scalar alpha = ctx.arg("alpha").scalar();
  return ctx.gradients({{"self", g[0]}, {"other", alpha.to_double() == 1.0 ? g[0] : mul(g[0], alpha)}});
}
TensorList sub_backward(const BackwardContext& ctx, const TensorList& g) {
  return ctx.gradients({{"self", g[0]},
                        {"other", ctx.needs_grad("other") ? mul(g[0], Scalar(-ctx.arg("alpha").scalar().to_double())) : Tensor()}});
}
TensorList mul_backward(const BackwardContext& ctx, const TensorList& g) {
  return ctx.gradients({{"self", ctx.needs_grad("self") ? mul(g[0], ctx.input("other")) : Tensor()},
                        {"other", ctx.needs_grad("other") ? mul(g[0], ctx.input("self")) : Tensor()}});
}
// d(a/b)/da = 1/b, d(a/b)/db = -a/b^2
TensorList div_backward(const BackwardContext& ctx, const TensorList& g) {
  const Tensor& b = ctx.input("other");
  Tensor ga = ctx.needs_grad("self") ? div(g[0], b) : Tensor();
  Tensor gb;
  if (ctx.needs_grad("other")) {
    const Tensor& a = ctx.input("self");
    // A broadcast divisor (QConvBN's per-channel factor): reduce g * a to b's shape first, in
    // one pass that does not write the product, and divide the small result.
    if (b.numel() < g[0].numel() && a.sizes() == g[0].sizes()) gb = div(mul_sum_to(g[0], a, b.sizes()), mul(b, b)).neg();
    else gb = mul(div(div(g[0], b), b), a).neg();
  }
  return ctx.gradients({{"self", ga}, {"other", gb}});
}
TensorList identity_backward(const BackwardContext&, const TensorList& g) { return {g[0]}; }
TensorList negate_backward(const BackwardContext&, const TensorList& g) { return {mul(g[0], Scalar(-1))}; }
TensorList mul_scalar_backward(const BackwardContext& ctx, const TensorList& g) { return {mul(g[0], ctx.arg("other").scalar())}; }
TensorList div_scalar_backward(const BackwardContext& ctx, const TensorList& g) { return {div(g[0], ctx.arg("other").scalar())}; }
// d(s/x)/dx = -s/x^2 = -out/x
TensorList rdiv_backward(const BackwardContext& ctx, const TensorList& g) {
  return {mul(g[0], div(ctx.output(0), ctx.input("self"))).neg()};
}

}  // namespace

}  // namespace qflow::autograd

#include "autograd/derivatives/arithmetic.derivatives.inc"
