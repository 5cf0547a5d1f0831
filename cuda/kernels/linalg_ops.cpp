// The CUDA kernels of mm, bmm, matmul and addmm: cuBLAS GEMMs, with the CPU kernels' argument
// checks and results (core/kernels/linalg/linalg.cpp).
//
// Note [cuBLAS matrix products]
// Every product is C = alpha * A @ B + beta * C over a batch, C a fresh row-major result.
// cuBLAS is column-major, so the row-major product is computed as its transpose,
// C^T (m x n) = B^T (m x k) @ A^T (k x n): a row-major operand with row stride ld *is* its
// transpose in column-major terms (op N, leading dimension ld), and a column-major one — a
// transposed view, `weight.t()` of a linear layer, the `mat2.t()` of mm's backward — is read in
// place with op T. Only an operand whose last two strides are neither (a column slice with a
// step, an expanded matrix) is copied contiguous first, before its batch dims are broadcast,
// so broadcasting never copies.
// Batches: the operands' batch dims (broadcast dims get stride 0) go to one
// cublasGemmStridedBatchedEx call when they collapse to a single stride for A, B and C alike;
// otherwise the outer dims that do not collapse are looped on the host around a strided
// batched call over the inner ones. A right operand shared by the whole batch (stride 0: a
// linear layer on a 3-D input) with a left operand whose rows are evenly spaced across the
// batch runs as one tall GEMM instead (B n rows), as the CPU does.
// Math: float32 multiplies in TF32 (CUBLAS_COMPUTE_32F_FAST_TF32, math mode
// CUBLAS_TF32_TENSOR_OP_MATH) when allow_tf32() (Note [TF32]), else in true float32
// (CUBLAS_COMPUTE_32F, CUBLAS_DEFAULT_MATH); the compute type is explicit per call and the
// handle's math mode is set to agree with it each call, so no other user of the handle can leave
// it in the wrong mode. float64 uses CUBLAS_COMPUTE_64F. Integer products (the CPU's OpenBLAS
// fallback loops) are not offered by cuBLAS: they are refused naming the op, dtype and device.
// The 64-bit cuBLAS API (_64 entry points) takes any size the tensors can have.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/linalg.cuh"
#include "qflow/core/device_runtime.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"
#include "src/cuda_ops.h"

namespace qflow::cuda {
namespace {

// ---- argument checks: the CPU kernels' (core/kernels/linalg/linalg.cpp), same messages -------------

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

void check_dtypes(const char* op, const char* an, const Tensor& a, const char* bn, const Tensor& b) {
  QFLOW_CHECK(a.dtype() == b.dtype(), "{}: expected {} and {} to have the same dtype, got {} and {}", op, an, bn,
              a.dtype(), b.dtype());
  QFLOW_CHECK(a.dtype() != DType::Bool, "{}: bool tensors are not supported", op);
}

// What the GPU adds: cuBLAS multiplies floating types only.
void check_gpu_dtype(const char* op, const Tensor& t) {
  QFLOW_CHECK(t.dtype() == DType::Float32 || t.dtype() == DType::Float64,
              "{}: {} tensors are not supported on {} (cuBLAS multiplies float32 and float64)", op, t.dtype(),
              t.device());
}

std::vector<int64_t> mm_shape(const char* op, const Tensor& m1, const Tensor& m2) {
  QFLOW_CHECK(m1.dim() == 2 && m2.dim() == 2, "{}: expected 2-D matrices, got mat1 of shape {} and mat2 of shape {}", op,
              m1.sizes(), m2.sizes());
  QFLOW_CHECK(m1.sizes()[1] == m2.sizes()[0], "{}: mat1 and mat2 shapes cannot be multiplied ({} and {})", op,
              dims_str(m1.sizes()), dims_str(m2.sizes()));
  check_dtypes(op, "mat1", m1, "mat2", m2);
  return {m1.sizes()[0], m2.sizes()[1]};
}

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

// Note [matmul as batched GEMM] (core/kernels/linalg/linalg.cpp): 1-D operands are lifted to a row /
// a column, batch dims broadcast.
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

// ---- operands --------------------------------------------------------------------------------

/// A view of t's storage with other sizes and strides (no autograd: kernels run below it).
Tensor restrided(const Tensor& t, std::vector<int64_t> sizes, std::vector<int64_t> strides) {
  return Tensor(std::make_shared<TensorImpl>(t.impl()->storage(), std::move(sizes), std::move(strides),
                                             t.storage_offset(), t.dtype()));
}

/// How cuBLAS reads an (r, c) matrix with strides (rs, cs) in the swapped product (Note
/// [cuBLAS matrix products]): row-major (trans false, ld = row stride) or column-major (trans
/// true, ld = column stride). False when it is neither.
bool matrix_layout(int64_t r, int64_t c, int64_t rs, int64_t cs, bool* trans, int64_t* ld) {
  if ((c == 1 || cs == 1) && (r == 1 || rs >= std::max<int64_t>(c, 1))) {
    *trans = false;
    *ld = r == 1 ? std::max<int64_t>(c, 1) : rs;
    return true;
  }
  if ((r == 1 || rs == 1) && (c == 1 || cs >= std::max<int64_t>(r, 1))) {
    *trans = true;
    *ld = c == 1 ? std::max<int64_t>(r, 1) : cs;
    return true;
  }
  return false;
}

/// One operand (..., r, c) of a batched product as cuBLAS reads it.
struct Operand {
  Tensor keep;  // the tensor read: the operand or its contiguous copy
  const char* base = nullptr;
  bool trans = false;
  int64_t ld = 1;
  std::vector<int64_t> batch_strides;  // one per dim of the product's batch (0: broadcast)
};

Operand operand(const Tensor& t, const std::vector<int64_t>& batch, int64_t r, int64_t c) {
  Operand o;
  o.keep = t;
  const int64_t d = t.dim();
  const auto readable = [&](const Tensor& x) {
    return matrix_layout(r, c, x.strides()[d - 2], x.strides()[d - 1], &o.trans, &o.ld);
  };
  if (!readable(t)) {
    o.keep = contiguous(t);
    const bool ok = readable(o.keep);
    QFLOW_ASSERT(ok, "a contiguous ({}, {}) matrix has strides {}", r, c, o.keep.strides());
  }
  o.base = static_cast<const char*>(o.keep.raw_data());
  const size_t nb = static_cast<size_t>(d - 2), B = batch.size();
  o.batch_strides.assign(B, 0);
  for (size_t i = B - std::min(nb, B); i < B; ++i) {
    const size_t j = i - (B - nb);
    if (o.keep.sizes()[j] != 1) o.batch_strides[i] = o.keep.strides()[j];
  }
  return o;
}

// ---- the GEMM driver ---------------------------------------------------------------------------

struct Gemm {
  cublasHandle_t handle;
  DType dtype;
  cudaDataType_t type;
  cublasComputeType_t compute;
  float alpha_f, beta_f;
  double alpha_d, beta_d;
  const char* op;

  const void* alpha() const { return dtype == DType::Float32 ? static_cast<const void*>(&alpha_f) : &alpha_d; }
  const void* beta() const { return dtype == DType::Float32 ? static_cast<const void*>(&beta_f) : &beta_d; }

  // `count` products of (n x k) @ (k x m) at a + i sa, b + i sb → c + i sc (element strides).
  void run(const Operand& A, const char* a, int64_t sa, const Operand& B, const char* b, int64_t sb, char* c,
           int64_t sc, int64_t n, int64_t k, int64_t m, int64_t count) const {
    // A shared right operand and evenly spaced left rows: one tall GEMM.
    if (count > 1 && sb == 0 && !A.trans && sa == n * A.ld && sc == n * m) {
      n *= count;
      count = 1;
    }
    const cublasOperation_t op_a = A.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = B.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (count == 1) {
      QFLOW_CUBLAS_CHECK(cublasGemmEx_64(handle, op_b, op_a, m, n, k, alpha(), b, type, B.ld, a, type, A.ld, beta(), c,
                                         type, m, compute, CUBLAS_GEMM_DEFAULT),
                         fmt::format("{}: cublasGemmEx", op).c_str());
    } else {
      QFLOW_CUBLAS_CHECK(cublasGemmStridedBatchedEx_64(handle, op_b, op_a, m, n, k, alpha(), b, type, B.ld, sb, a, type,
                                                       A.ld, sa, beta(), c, type, m, sc, count, compute,
                                                       CUBLAS_GEMM_DEFAULT),
                         fmt::format("{}: cublasGemmStridedBatchedEx", op).c_str());
    }
  }
};

/// out (batch..., n, m), contiguous and fresh, = alpha * A @ B + beta * out, for A (batch..., n,
/// k) and B (batch..., k, m) described by `a`, `b`. n, m, k > 0. Runs on the handle's stream,
/// the device's one stream (context.h).
void batched_gemm(const char* op, const Tensor& out, const std::vector<int64_t>& batch, int64_t n, int64_t k,
                  int64_t m, const Operand& a, const Operand& b, double alpha, double beta) {
  const DType dt = out.dtype();
  Gemm gemm;
  gemm.handle = cublas(out.device());
  gemm.dtype = dt;
  gemm.op = op;
  gemm.alpha_f = static_cast<float>(alpha);
  gemm.beta_f = static_cast<float>(beta);
  gemm.alpha_d = alpha;
  gemm.beta_d = beta;
  const bool tf32 = dt == DType::Float32 && allow_tf32();
  if (dt == DType::Float32) {
    gemm.type = CUDA_R_32F;
    gemm.compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  } else {
    gemm.type = CUDA_R_64F;
    gemm.compute = CUBLAS_COMPUTE_64F;
  }
  QFLOW_CUBLAS_CHECK(cublasSetMathMode(gemm.handle, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
                     fmt::format("{}: cublasSetMathMode", op).c_str());

  // The batch dims that matter (size > 1), with each tensor's stride along them.
  struct Dim {
    int64_t size, sa, sb, sc;
  };
  std::vector<Dim> dims;
  int64_t out_stride = n * m;
  std::vector<int64_t> sc(batch.size());
  for (size_t i = batch.size(); i-- > 0;) {
    sc[i] = out_stride;
    out_stride *= batch[i];
  }
  for (size_t i = 0; i < batch.size(); ++i)
    if (batch[i] != 1) dims.push_back(Dim{batch[i], a.batch_strides[i], b.batch_strides[i], sc[i]});
  // The longest suffix of dims that collapses to one stride for all three tensors runs as one
  // strided batched call; the dims before it are looped here.
  const auto collapses = [&](size_t j) {
    for (size_t d = j; d + 1 < dims.size(); ++d) {
      const Dim& o = dims[d];
      const Dim& i = dims[d + 1];
      if (o.sa != i.sa * i.size || o.sb != i.sb * i.size || o.sc != i.sc * i.size) return false;
    }
    return true;
  };
  size_t j = 0;
  while (!collapses(j)) ++j;
  int64_t count = 1;
  for (size_t d = j; d < dims.size(); ++d) count *= dims[d].size;
  const int64_t sa = dims.empty() || j == dims.size() ? 0 : dims.back().sa;
  const int64_t sb = dims.empty() || j == dims.size() ? 0 : dims.back().sb;
  const int64_t scc = dims.empty() || j == dims.size() ? 0 : dims.back().sc;
  const int64_t es = static_cast<int64_t>(element_size(dt));
  char* c_base = static_cast<char*>(out.raw_data());
  std::vector<int64_t> idx(j, 0);  // odometer over the looped dims
  while (true) {
    int64_t oa = 0, ob = 0, oc = 0;
    for (size_t d = 0; d < j; ++d) {
      oa += idx[d] * dims[d].sa;
      ob += idx[d] * dims[d].sb;
      oc += idx[d] * dims[d].sc;
    }
    gemm.run(a, a.base + oa * es, sa, b, b.base + ob * es, sb, c_base + oc * es, scc, n, k, m, count);
    size_t d = j;
    while (d > 0 && ++idx[d - 1] == dims[d - 1].size) idx[--d] = 0;
    if (d == 0) break;
  }
}

int64_t numel_of(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

void zero_fill(const Tensor& t, cudaStream_t stream, const char* op) {
  if (t.numel() > 0) QFLOW_CUDA_CHECK(cudaMemsetAsync(t.raw_data(), 0, t.nbytes(), stream), op);
}

/// out (batch..., n, m) = x @ y for x (batch_x..., n, k), y (batch_y..., k, m) broadcast to batch.
void product(const char* op, const Tensor& out, const std::vector<int64_t>& batch, int64_t n, int64_t k, int64_t m,
             const Tensor& x, const Tensor& y, cudaStream_t stream) {
  if (numel_of(batch) * n * m == 0) return;
  if (k == 0) return zero_fill(out, stream, op);  // an empty sum
  batched_gemm(op, out, batch, n, k, m, operand(x, batch, n, k), operand(y, batch, k, m), 1.0, 0.0);
}

// ---- kernels -----------------------------------------------------------------------------------

Stack mm_cuda(OpArgs& a) {
  const Tensor& m1 = a.tensor("self");
  const Tensor& m2 = a.tensor("mat2");
  const auto shape = mm_shape("mm", m1, m2);
  check_gpu_dtype("mm", m1);
  Launch launch(m1);
  Tensor o = empty(shape, m1.dtype(), m1.device());
  product("mm", o, {}, shape[0], m1.sizes()[1], shape[1], m1, m2, launch.stream);
  return Stack{Value(o)};
}

Stack bmm_cuda(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const Tensor& y = a.tensor("mat2");
  const auto shape = bmm_shape(x, y);
  check_gpu_dtype("bmm", x);
  Launch launch(x);
  Tensor o = empty(shape, x.dtype(), x.device());
  product("bmm", o, {shape[0]}, shape[1], x.sizes()[2], shape[2], x, y, launch.stream);
  return Stack{Value(o)};
}

Stack matmul_cuda(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const Tensor& y = a.tensor("other");
  const MatmulPlan p = matmul_plan(x, y);
  check_gpu_dtype("matmul", x);
  Launch launch(x);
  // 1-D operands as a (1, k) row and a (k, 1) column (views).
  const Tensor xm = x.dim() == 1 ? restrided(x, {1, p.k}, {p.k * x.strides()[0], x.strides()[0]}) : x;
  const Tensor ym = y.dim() == 1 ? restrided(y, {p.k, 1}, {y.strides()[0], 1}) : y;
  Tensor o = empty(p.result, x.dtype(), x.device());  // contiguous: also (batch..., n, m)
  product("matmul", o, p.batch, p.n, p.k, p.m, xm, ym, launch.stream);
  return Stack{Value(o)};
}

Stack addmm_cuda(OpArgs& a) {
  const Tensor& self = a.tensor("self");
  const Tensor& m1 = a.tensor("mat1");
  const Tensor& m2 = a.tensor("mat2");
  const auto shape = mm_shape("addmm", m1, m2);
  check_dtypes("addmm", "self", self, "mat1", m1);
  bool ok = self.dim() <= 2;
  for (int64_t i = 0; ok && i < self.dim(); ++i) {
    const int64_t s = self.sizes()[self.dim() - 1 - i];
    ok = s == 1 || s == shape[1 - i];
  }
  QFLOW_CHECK(ok, "addmm: self of shape {} cannot be broadcast to the product's shape {}", dims_str(self.sizes()),
              dims_str(shape));
  const Scalar beta_s = a.scalar("beta"), alpha_s = a.scalar("alpha");
  QFLOW_CHECK(is_floating(self.dtype()) || (beta_s.is_integral() && alpha_s.is_integral()),
              "addmm: for integer tensors, beta and alpha must be integers, got {} and {}", beta_s, alpha_s);
  check_gpu_dtype("addmm", self);
  Launch launch(m1);
  const DType dt = self.dtype();
  const int64_t n = shape[0], m = shape[1], k = m1.sizes()[1];
  const double beta = beta_s.to_double(), alpha = alpha_s.to_double();
  Tensor o = empty(shape, dt, m1.device());
  if (n * m == 0) return Stack{Value(o)};
  // beta == 0 ignores self entirely (NaN/inf in self do not leak), like BLAS and PyTorch.
  const bool use_self = beta != 0;
  if (use_self) {
    // self broadcast to (n, m): a stride of 0 along a size-1 or missing dim.
    int64_t s0 = 0, s1 = 0;
    if (self.dim() == 2) {
      s0 = self.sizes()[0] == 1 ? 0 : self.strides()[0];
      s1 = self.sizes()[1] == 1 ? 0 : self.strides()[1];
    } else if (self.dim() == 1) {
      s1 = self.sizes()[0] == 1 ? 0 : self.strides()[0];
    }
    // With k == 0 the product is empty: the result is beta * self, scaled here.
    linalg::launch_broadcast_fill(dt == DType::Float32 ? linalg::Elem::F32 : linalg::Elem::F64, self.raw_data(), s0,
                                  s1, o.raw_data(), n, m, k == 0 ? beta : 1.0, launch.stream);
    QFLOW_CUDA_CHECK_LAUNCH("addmm");
  }
  if (k == 0) {
    if (!use_self) zero_fill(o, launch.stream, "addmm");
    return Stack{Value(o)};
  }
  batched_gemm("addmm", o, {}, n, k, m, operand(m1, {}, n, k), operand(m2, {}, k, m), alpha, use_self ? beta : 0.0);
  return Stack{Value(o)};
}

}  // namespace
}  // namespace qflow::cuda

#include "cuda/kernels/linalg_ops.cuda.inc"
