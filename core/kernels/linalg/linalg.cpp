// Linear algebra: mm, bmm, matmul (NumPy semantics), addmm — all GEMMs through gemm.h
// (OpenBLAS for floats; transposed views are read in place, see Note [GEMM operand layouts]).
#include <string>

#include "kernels/linalg/gemm.h"
#include "kernels/common/kernel_utils.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/ops.h"

namespace qflow {
namespace kernels {
namespace {

// "2x3" — the way PyTorch prints shapes in matmul errors.
std::string dims_str(const std::vector<int64_t>& s) {
  if (s.empty()) return "[]";
  std::string r = std::to_string(s[0]);
  for (size_t i = 1; i < s.size(); ++i) {
    r.push_back('x');
    r.append(std::to_string(s[i]));
  }
  return r;
}

SymIntList sym(const std::vector<int64_t>& v) { return SymIntList(v.begin(), v.end()); }

void check_dtypes(const char* op, const char* an, const Tensor& a, const char* bn, const Tensor& b) {
  QFLOW_CHECK(a.dtype() == b.dtype(), "{}: expected {} and {} to have the same dtype, got {} and {}", op, an, bn,
              a.dtype(), b.dtype());
  QFLOW_CHECK(a.dtype() != DType::Bool, "{}: bool tensors are not supported", op);
}

// ---- mm / addmm ---------------------------------------------------------------------------

// mat1: (n, k), mat2: (k, m) → (n, m)
std::vector<int64_t> mm_shape(const char* op, const Tensor& m1, const Tensor& m2) {
  QFLOW_CHECK(m1.dim() == 2 && m2.dim() == 2, "{}: expected 2-D matrices, got mat1 of shape {} and mat2 of shape {}", op,
              m1.sizes(), m2.sizes());
  QFLOW_CHECK(m1.sizes()[1] == m2.sizes()[0], "{}: mat1 and mat2 shapes cannot be multiplied ({} and {})", op,
              dims_str(m1.sizes()), dims_str(m2.sizes()));
  check_dtypes(op, "mat1", m1, "mat2", m2);
  return {m1.sizes()[0], m2.sizes()[1]};
}

std::vector<TensorMeta> mm_meta(const OpArgs& a) {
  return one(mm_shape("mm", a.tensor("self"), a.tensor("mat2")), a.tensor("self").dtype());
}

Stack mm_kernel(OpArgs& a) {
  const Tensor& m1 = a.tensor("self");
  const Tensor& m2 = a.tensor("mat2");
  Tensor o = new_tensor(mm_shape("mm", m1, m2), m1.dtype());
  batched_matmul(o, blas_ready(m1), blas_ready(m2), Scalar(1), Scalar(0));
  return out(o);
}

// self: broadcastable to (n, m); mat1: (n, k); mat2: (k, m) → (n, m)
std::vector<TensorMeta> addmm_meta(const OpArgs& a) {
  const Tensor& self = a.tensor("self");
  const auto shape = mm_shape("addmm", a.tensor("mat1"), a.tensor("mat2"));
  check_dtypes("addmm", "self", self, "mat1", a.tensor("mat1"));
  bool ok = self.dim() <= 2;
  for (int64_t i = 0; ok && i < self.dim(); ++i) {
    const int64_t s = self.sizes()[self.dim() - 1 - i];
    ok = s == 1 || s == shape[1 - i];
  }
  QFLOW_CHECK(ok, "addmm: self of shape {} cannot be broadcast to the product's shape {}", dims_str(self.sizes()),
              dims_str(shape));
  // A fractional beta/alpha would be truncated silently on integer tensors (PyTorch refuses too).
  QFLOW_CHECK(is_floating(self.dtype()) || (a.scalar("beta").is_integral() && a.scalar("alpha").is_integral()),
              "addmm: for integer tensors, beta and alpha must be integers, got {} and {}", a.scalar("beta"),
              a.scalar("alpha"));
  return one(shape, self.dtype());
}

Stack addmm_kernel(OpArgs& a) {
  const TensorMeta m = addmm_meta(a)[0];
  const Scalar beta = a.scalar("beta"), alpha = a.scalar("alpha");
  Tensor o = new_tensor(m.sizes, m.dtype);
  // beta == 0 ignores self entirely (NaN/inf in self do not leak), like BLAS and PyTorch.
  const bool use_self = beta.to_double() != 0;
  if (use_self) copy_(o, a.tensor("self"));
  batched_matmul(o, blas_ready(a.tensor("mat1")), blas_ready(a.tensor("mat2")), alpha, use_self ? beta : Scalar(0));
  return out(o);
}

// ---- bmm --------------------------------------------------------------------------------

// self: (B, n, k), mat2: (B, k, m) → (B, n, m)
std::vector<int64_t> bmm_shape(const Tensor& x, const Tensor& y) {
  QFLOW_CHECK(x.dim() == 3 && y.dim() == 3, "bmm: expected 3-D tensors, got batch1 of shape {} and batch2 of shape {}",
              x.sizes(), y.sizes());
  QFLOW_CHECK(x.sizes()[0] == y.sizes()[0], "bmm: batch1 and batch2 must have the same batch size ({} and {})",
              dims_str(x.sizes()), dims_str(y.sizes()));
  QFLOW_CHECK(x.sizes()[2] == y.sizes()[1], "bmm: batch1 and batch2 shapes cannot be multiplied ({} and {})",
              dims_str(x.sizes()), dims_str(y.sizes()));
  check_dtypes("bmm", "batch1", x, "batch2", y);
  return {x.sizes()[0], x.sizes()[1], y.sizes()[2]};
}

std::vector<TensorMeta> bmm_meta(const OpArgs& a) {
  return one(bmm_shape(a.tensor("self"), a.tensor("mat2")), a.tensor("self").dtype());
}

Stack bmm_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const Tensor& y = a.tensor("mat2");
  Tensor o = new_tensor(bmm_shape(x, y), x.dtype());
  batched_matmul(o, blas_ready(x), blas_ready(y), Scalar(1), Scalar(0));
  return out(o);
}

// ---- matmul -------------------------------------------------------------------------------

// Note [matmul as batched GEMM]
// A 1-D left operand is a (1, k) row and a 1-D right operand a (k, 1) column; the added dim
// is dropped from the result. Batch dims (all but the last two) broadcast. Operands are made
// BLAS-ready *before* their batch dims are expanded, so broadcasting never copies; a right
// operand shared by the whole batch lets a foldable left operand run as one tall GEMM.
struct MatmulPlan {
  std::vector<int64_t> batch;  // broadcast batch dims
  int64_t n = 1, k = 1, m = 1;
  std::vector<int64_t> result;  // the user-visible output shape
};

MatmulPlan matmul_plan(const Tensor& x, const Tensor& y) {
  const auto& xs = x.sizes();
  const auto& ys = y.sizes();
  QFLOW_CHECK(x.dim() >= 1 && y.dim() >= 1, "matmul: both arguments need to be at least 1-D, got shapes {} and {}",
              dims_str(xs), dims_str(ys));
  check_dtypes("matmul", "self", x, "other", y);
  MatmulPlan p;
  p.n = x.dim() == 1 ? 1 : xs[x.dim() - 2];
  p.k = xs.back();
  p.m = y.dim() == 1 ? 1 : ys.back();
  const int64_t yk = y.dim() == 1 ? ys[0] : ys[y.dim() - 2];
  QFLOW_CHECK(p.k == yk, "matmul: shapes cannot be multiplied ({} and {})", dims_str(xs), dims_str(ys));
  const std::vector<int64_t> xb(xs.begin(), xs.end() - std::min<int64_t>(2, x.dim()));
  const std::vector<int64_t> yb(ys.begin(), ys.end() - std::min<int64_t>(2, y.dim()));
  const size_t nb = std::max(xb.size(), yb.size());
  p.batch.assign(nb, 1);
  for (size_t i = 0; i < nb; ++i) {
    const int64_t u = i < xb.size() ? xb[xb.size() - 1 - i] : 1;
    const int64_t v = i < yb.size() ? yb[yb.size() - 1 - i] : 1;
    QFLOW_CHECK(u == v || u == 1 || v == 1, "matmul: batch dimensions cannot be broadcast ({} and {})", dims_str(xs),
                dims_str(ys));
    p.batch[nb - 1 - i] = u == 1 ? v : u;
  }
  p.result = p.batch;
  if (x.dim() > 1) p.result.push_back(p.n);
  if (y.dim() > 1) p.result.push_back(p.m);
  return p;
}

std::vector<TensorMeta> matmul_meta(const OpArgs& a) {
  return one(matmul_plan(a.tensor("self"), a.tensor("other")).result, a.tensor("self").dtype());
}

// Expands a BLAS-ready (…, r, c) operand to (batch..., r, c) without copying.
Tensor expand_to_batch(const Tensor& t, const std::vector<int64_t>& batch, int64_t r, int64_t c) {
  std::vector<int64_t> shape = batch;
  shape.push_back(r);
  shape.push_back(c);
  return t.sizes() == shape ? t : expand(t, sym(shape));
}

Stack matmul_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const Tensor& y = a.tensor("other");
  const MatmulPlan p = matmul_plan(x, y);
  const Tensor xm = blas_ready(x.dim() == 1 ? unsqueeze(x, 0) : x);   // (…, n, k)
  const Tensor ym = blas_ready(y.dim() == 1 ? unsqueeze(y, 1) : y);   // (…, k, m)
  Tensor o = new_tensor(p.result, x.dtype());
  // The result is contiguous, so the full (batch..., n, m) shape is a plain view of it.
  std::vector<int64_t> full = p.batch;
  full.push_back(p.n);
  full.push_back(p.m);
  const Tensor o_full = make_view(o, full, contiguous_strides(full), o.storage_offset());
  batched_matmul(o_full, expand_to_batch(xm, p.batch, p.n, p.k), expand_to_batch(ym, p.batch, p.k, p.m), Scalar(1),
                 Scalar(0));
  return out(o);
}

}  // namespace
}  // namespace kernels

}  // namespace qflow

// The registration and typed functions of core/ops/linalg.toml (Note [One declaration per op]).
#include "core/ops/linalg.inc"
