// Derivatives of core/kernels/elementwise/compare.cpp: comparisons return bool masks (no gradient);
// where routes the gradient to the branch each element was taken from.
#include "qflow/autograd/derivatives.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"

namespace qflow::autograd {
namespace {

// Why the comparisons (core/ops/compare.toml) have no derivative.
constexpr std::string_view kBooleanOutputs = "boolean outputs";

// The condition is a bool mask: it gets no gradient.
TensorList where_backward(const BackwardContext& ctx, const TensorList& g) {
  const Tensor& cond = ctx.input("condition");
  const Tensor zero = scalar_tensor(0, g[0].dtype(), g[0].device());
  return ctx.gradients({{"self", ctx.needs_grad("self") ? where(cond, g[0], zero) : Tensor()},
                        {"other", ctx.needs_grad("other") ? where(cond, zero, g[0]) : Tensor()}});
}

}  // namespace

}  // namespace qflow::autograd

#include "autograd/derivatives/compare.derivatives.inc"
