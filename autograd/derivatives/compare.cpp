// Derivatives of core/kernels/compare.cpp: comparisons return bool masks (no gradient);
// where routes the gradient to the branch each element was taken from.
#include "qflow/autograd/derivatives.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"

namespace qflow::autograd {
namespace {

// Flat inputs: 0 = condition (bool, never differentiable), 1 = self, 2 = other.
TensorList where_backward(const BackwardContext& ctx, const TensorList& g) {
  const Tensor& cond = ctx.input(0);
  const Tensor zero = scalar_tensor(0, g[0].dtype());
  return {Tensor(), ctx.needs_grad(1) ? where(cond, g[0], zero) : Tensor(),
          ctx.needs_grad(2) ? where(cond, zero, g[0]) : Tensor()};
}

}  // namespace

QFLOW_REGISTER_DERIVATIVES(compare) {
  registry.non_differentiable({"eq", "ne", "lt", "le", "gt", "ge", "eq.Scalar", "ne.Scalar", "lt.Scalar", "le.Scalar",
                               "gt.Scalar", "ge.Scalar"});
  registry.def("where", {.node_name = "WhereBackward", .save_inputs = save_inputs({0}), .backward = where_backward});
}

}  // namespace qflow::autograd
