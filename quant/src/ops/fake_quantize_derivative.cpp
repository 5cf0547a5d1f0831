// Derivative of the fake_quantize op (fake_quantize_kernel.cpp): the straight-through
// estimator. See Note [Quantization numerics] in fake_quantize.h.
#include "qflow/autograd/derivatives.h"
#include "qflow/quant/fake_quantize.h"

namespace qflow::quant {
namespace {

// The pure estimator reads no saved tensor, so it never trips the version check on them;
// scale and zero_point are statistics and get no gradient (undefined), like the qparams of
// PyTorch's fake_quantize_per_*_affine.
TensorList fake_quantize_rule(const autograd::BackwardContext& ctx, const TensorList& g) {
  if (!ctx.arg("clipped_ste").to_bool()) return ctx.gradients({{"self", g[0]}});
  return ctx.gradients({{"self", fake_quantize_backward(g[0], ctx.input("self"), ctx.input("scale"),
                                                        ctx.input("zero_point"), ctx.arg("quant_min").to_int(),
                                                        ctx.arg("quant_max").to_int(), ctx.arg("axis").to_int())}});
}

}  // namespace
}  // namespace qflow::quant

#include "quant/src/ops/fake_quantize_derivative.derivatives.inc"
