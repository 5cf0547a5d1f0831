// Derivatives of core/kernels/elementwise/clamp.cpp. relu_ and clamp_ are differentiated through these
// out-of-place twins (see Note [In-place ops under autograd] in autograd_layer.cpp).
#include <optional>

#include "qflow/autograd/derivatives.h"
#include "qflow/core/factory.h"
#include "qflow/core/nn_ops.h"
#include "qflow/core/ops.h"

namespace qflow::autograd {
namespace {

// g where mask, 0 elsewhere.
Tensor masked(const Tensor& mask, const Tensor& g) { return where(mask, g, scalar_tensor(0, g.dtype(), g.device())); }

// Gradient flows where the output is positive (0 at x = 0, like PyTorch), in one fused pass
// that keeps blocked activations blocked (Note [Opaque layouts]).
TensorList relu_backward(const BackwardContext& ctx, const TensorList& g) {
  return {threshold_backward(g[0], ctx.output(0), Scalar(0))};
}

// Gradient passes where min <= x <= max, bounds included (PyTorch's convention).
TensorList clamp_backward(const BackwardContext& ctx, const TensorList& g) {
  const Tensor& x = ctx.input("self");
  const std::optional<Scalar> lo = ctx.arg("min").optional_scalar();
  const std::optional<Scalar> hi = ctx.arg("max").optional_scalar();
  Tensor grad = g[0];
  if (lo) grad = masked(ge(x, *lo), grad);
  if (hi) grad = masked(le(x, *hi), grad);
  return {grad};
}

}  // namespace

}  // namespace qflow::autograd

#include "autograd/derivatives/clamp.derivatives.inc"
