// Derivatives of core/kernels/linalg/linalg.cpp: mm, bmm, matmul, addmm.
//
// matmul has its own rule rather than being a composite of mm/bmm/reshape: kernels run
// below every dispatch layer (see Dispatcher::redispatch), so ops a composite kernel calls
// would be invisible to autograd and fx alike; one rule keeps "one op, one node" and lets a
// traced graph show `matmul`. The rule handles every rank case: 1-D operands are lifted to
// matrices, and gradients of broadcast batch dims are summed back to each input's shape.
#include "qflow/autograd/derivatives.h"
#include "qflow/core/ops.h"

namespace qflow::autograd {
namespace {

Tensor mT(const Tensor& x) { return x.transpose(-2, -1); }

SymIntList sym(const std::vector<int64_t>& v) { return SymIntList(v.begin(), v.end()); }

// d(a @ b)/da = g @ b^T, d(a @ b)/db = a^T @ g — the transposes are views BLAS reads in place.
TensorList mm_backward(const BackwardContext& ctx, const TensorList& g) {
  return ctx.gradients({{"self", ctx.needs_grad("self") ? mm(g[0], ctx.input("mat2").t()) : Tensor()},
                        {"mat2", ctx.needs_grad("mat2") ? mm(ctx.input("self").t(), g[0]) : Tensor()}});
}

TensorList bmm_backward(const BackwardContext& ctx, const TensorList& g) {
  return ctx.gradients({{"self", ctx.needs_grad("self") ? bmm(g[0], mT(ctx.input("mat2"))) : Tensor()},
                        {"mat2", ctx.needs_grad("mat2") ? bmm(mT(ctx.input("self")), g[0]) : Tensor()}});
}

// out = beta * self + alpha * mat1 @ mat2 (the engine sums self's gradient to its shape).
TensorList addmm_backward(const BackwardContext& ctx, const TensorList& g) {
  const Scalar beta = ctx.arg("beta").scalar(), alpha = ctx.arg("alpha").scalar();
  auto scaled = [](const Tensor& t, const Scalar& s) { return s.to_double() == 1 ? t : mul(t, s); };
  Tensor gs = ctx.needs_grad("self") ? scaled(g[0], beta) : Tensor();
  Tensor g1 = ctx.needs_grad("mat1") ? scaled(mm(g[0], ctx.input("mat2").t()), alpha) : Tensor();
  Tensor g2 = ctx.needs_grad("mat2") ? scaled(mm(ctx.input("mat1").t(), g[0]), alpha) : Tensor();
  return ctx.gradients({{"self", gs}, {"mat1", g1}, {"mat2", g2}});
}

// Sums `g` (broadcast batch dims) down to the lifted operand's shape, then drops the lift.
Tensor reduce_to(const Tensor& g, const Tensor& lifted, const std::vector<int64_t>& original) {
  Tensor r = g.sizes() == lifted.sizes() ? g : sum_to(g, lifted.sizes());
  return r.sizes() == original ? r : r.reshape(sym(original));
}

TensorList matmul_backward(const BackwardContext& ctx, const TensorList& g) {
  const Tensor& a = ctx.input("self");
  const Tensor& b = ctx.input("other");
  if (a.dim() == 1 && b.dim() == 1) {  // dot: g is 0-d
    return ctx.gradients({{"self", ctx.needs_grad("self") ? mul(b, g[0]) : Tensor()},
                          {"other", ctx.needs_grad("other") ? mul(a, g[0]) : Tensor()}});
  }
  const Tensor am = a.dim() == 1 ? a.unsqueeze(0) : a;  // (…, n, k)
  const Tensor bm = b.dim() == 1 ? b.unsqueeze(1) : b;  // (…, k, m)
  Tensor gm = g[0];                                     // (batch..., n, m)
  if (a.dim() == 1) gm = gm.unsqueeze(-2);
  if (b.dim() == 1) gm = gm.unsqueeze(-1);
  Tensor ga, gb;
  if (ctx.needs_grad("self")) ga = reduce_to(matmul(gm, mT(bm)), am, a.sizes());
  if (ctx.needs_grad("other")) {
    if (am.dim() > 2 && bm.dim() == 2) {
      // A matrix shared by the batch: fold the batch into the contraction, one GEMM
      // (k, batch*n) @ (batch*n, m) instead of batch products and a sum.
      const int64_t k = am.sizes().back(), m = gm.sizes().back();
      gb = reduce_to(mm(am.reshape({-1, k}).t(), gm.reshape({-1, m})), bm, b.sizes());
    } else {
      gb = reduce_to(matmul(mT(am), gm), bm, b.sizes());
    }
  }
  return ctx.gradients({{"self", ga}, {"other", gb}});
}

}  // namespace

}  // namespace qflow::autograd

#include "autograd/derivatives/linalg.derivatives.inc"
