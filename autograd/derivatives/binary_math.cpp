// Derivatives of core/kernels/elementwise/binary_math.cpp: pow (both forms), minimum, maximum.
// Broadcast gradients are summed back to each input's shape by the engine.
#include "qflow/autograd/derivatives.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"

namespace qflow::autograd {
namespace {

Tensor zero_like_scalar(const Tensor& g) { return scalar_tensor(0, g.dtype(), g.device()); }

// d(a^b)/da = b a^(b-1), taken as 0 where b = 0 (so 0^0 gives 0, not 0 * inf = nan);
// d(a^b)/db = a^b log(a), taken as 0 where a = 0 and b >= 0 (PyTorch's conventions).
TensorList pow_backward(const BackwardContext& ctx, const TensorList& g) {
  const Tensor& a = ctx.input("self");
  const Tensor& b = ctx.input("exponent");
  Tensor ga, gb;
  if (ctx.needs_grad("self")) {
    const Tensor d = mul(b, pow(a, sub(b, Scalar(1))));
    ga = where(eq(b, Scalar(0)), zero_like_scalar(g[0]), mul(g[0], d));
  }
  if (ctx.needs_grad("exponent")) {
    const Tensor d = mul(ctx.output(0), log(a));
    const Tensor zero_base = where(eq(a, Scalar(0)), ge(b, Scalar(0)), scalar_tensor(false, DType::Bool, a.device()));
    gb = where(zero_base, zero_like_scalar(g[0]), mul(g[0], d));
  }
  return ctx.gradients({{"self", ga}, {"exponent", gb}});
}

// d(x^e)/dx = e x^(e-1); exactly 0 for e = 0.
TensorList pow_scalar_backward(const BackwardContext& ctx, const TensorList& g) {
  const Scalar e = ctx.arg("exponent").scalar();
  if (e.to_double() == 0.0) return {zeros_like(g[0])};
  const Scalar e1 = e.is_floating() ? Scalar(e.to_double() - 1.0) : Scalar(e.to_int() - 1);
  return {mul(mul(g[0], pow(ctx.input("self"), e1)), e)};
}

// The selected operand gets the gradient; ties split it half/half (PyTorch), so the sum of
// both gradients is always g.
template <bool IsMax>
TensorList extremum_backward(const BackwardContext& ctx, const TensorList& g) {
  const Tensor& a = ctx.input("self");
  const Tensor& b = ctx.input("other");
  const Tensor zero = zero_like_scalar(g[0]);
  const Tensor shared = where(eq(a, b), mul(g[0], Scalar(0.5)), g[0]);
  Tensor ga = ctx.needs_grad("self") ? where(IsMax ? lt(a, b) : gt(a, b), zero, shared) : Tensor();
  Tensor gb = ctx.needs_grad("other") ? where(IsMax ? gt(a, b) : lt(a, b), zero, shared) : Tensor();
  return ctx.gradients({{"self", ga}, {"other", gb}});
}

}  // namespace

}  // namespace qflow::autograd

#include "autograd/derivatives/binary_math.derivatives.inc"
