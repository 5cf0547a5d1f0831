// Matrix products: OpenBLAS for float32/float64, a strided row-accumulating loop for
// integers. See Note [GEMM operand layouts].
#include "kernels/linalg/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <optional>
#include <type_traits>
#include <vector>

#include "kernels/common/kernel_utils.h"
#include "qflow/core/ops.h"
#include "qflow/core/parallel.h"

namespace qflow::kernels {
namespace {

// OpenBLAS 0.3.x runs a GEMM on one thread when M*N*K is at most 65536 * 4 (its SMP
// threshold); batches of such matrices are spread over our threads instead, and bigger
// ones go one by one so BLAS can use every core.
constexpr int64_t kSingleThreadGemmWork = 65536 * 4;
// Multiply-adds per parallel chunk of a batch, so fork/join stays a small fraction.
constexpr int64_t kBatchChunkWork = 1 << 16;

struct BlasLayout {
  CBLAS_TRANSPOSE trans;
  int64_t ld;
};

std::optional<BlasLayout> blas_layout(const MatView& m) {
  const int64_t r = m.rows, c = m.cols;
  if ((m.cs == 1 || c == 1) && (r == 1 || m.rs >= std::max<int64_t>(1, c)))
    return BlasLayout{CblasNoTrans, r == 1 ? std::max<int64_t>(1, c) : m.rs};
  if ((m.rs == 1 || r == 1) && (c == 1 || m.cs >= std::max<int64_t>(1, r)))
    return BlasLayout{CblasTrans, c == 1 ? std::max<int64_t>(1, r) : m.cs};
  return std::nullopt;
}

blasint bi(int64_t v) { return static_cast<blasint>(v); }

void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
               int64_t lda, const float* b, int64_t ldb, float beta, float* c) {
  use_best_openblas_kernels();
  cblas_sgemm(CblasRowMajor, ta, tb, bi(m), bi(n), bi(k), alpha, a, bi(lda), b, bi(ldb), beta, c, bi(n));
}
void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
               int64_t lda, const double* b, int64_t ldb, double beta, double* c) {
  use_best_openblas_kernels();
  cblas_dgemm(CblasRowMajor, ta, tb, bi(m), bi(n), bi(k), alpha, a, bi(lda), b, bi(ldb), beta, c, bi(n));
}
// y = op(S) x with S stored row-major (rows x cols, leading dim ld), y contiguous.
void blas_gemv(CBLAS_TRANSPOSE t, int64_t rows, int64_t cols, float alpha, const float* s, int64_t ld, const float* x,
               int64_t incx, float beta, float* y) {
  use_best_openblas_kernels();
  cblas_sgemv(CblasRowMajor, t, bi(rows), bi(cols), alpha, s, bi(ld), x, bi(incx), beta, y, 1);
}
void blas_gemv(CBLAS_TRANSPOSE t, int64_t rows, int64_t cols, double alpha, const double* s, int64_t ld, const double* x,
               int64_t incx, double beta, double* y) {
  use_best_openblas_kernels();
  cblas_dgemv(CblasRowMajor, t, bi(rows), bi(cols), alpha, s, bi(ld), x, bi(incx), beta, y, 1);
}

// c: (M, N) contiguous. `nested`: called from a parallel batch loop, where only GEMM is used
// (OpenBLAS keeps small GEMMs single-threaded; GEMV threads at much smaller sizes).
template <typename T>
void gemm_float(T alpha, const T* a, const MatView& av, const T* b, const MatView& bv, T beta, T* c, bool nested) {
  const BlasLayout la = *blas_layout(av), lb = *blas_layout(bv);
  const int64_t M = av.rows, K = av.cols, N = bv.cols;
  // Matrix-vector products go to GEMV: OpenBLAS 0.3.21's GEMM does not forward them itself.
  if (!nested && N == 1 && (K == 1 || bv.rs > 0)) {  // c = op(A) b[:, 0]
    const int64_t incx = K == 1 ? 1 : bv.rs;
    if (la.trans == CblasNoTrans) blas_gemv(CblasNoTrans, M, K, alpha, a, la.ld, b, incx, beta, c);
    else blas_gemv(CblasTrans, K, M, alpha, a, la.ld, b, incx, beta, c);
    return;
  }
  if (!nested && M == 1 && (K == 1 || av.cs > 0)) {  // c = op(B)^T a[0, :]
    const int64_t incx = K == 1 ? 1 : av.cs;
    if (lb.trans == CblasNoTrans) blas_gemv(CblasTrans, K, N, alpha, b, lb.ld, a, incx, beta, c);
    else blas_gemv(CblasNoTrans, N, K, alpha, b, lb.ld, a, incx, beta, c);
    return;
  }
  blas_gemm(la.trans, lb.trans, M, N, K, alpha, a, la.ld, b, lb.ld, beta, c);
}

// Integers (no BLAS): row i of c accumulates a[i, p] * b[p, :] over p, so the inner loop runs
// along b's row (unit stride when b is row-major) and vectorises. Overflow wraps, as in PyTorch.
template <typename T>
void gemm_int(T alpha, const T* a, const MatView& av, const T* b, const MatView& bv, T beta, T* c, bool nested) {
  const int64_t K = av.cols, N = bv.cols;
  auto rows = [&](int64_t i0, int64_t i1) {
    std::vector<T> acc(static_cast<size_t>(N));
    for (int64_t i = i0; i < i1; ++i) {
      std::fill(acc.begin(), acc.end(), T(0));
      for (int64_t p = 0; p < K; ++p) {
        const T x = a[i * av.rs + p * av.cs];
        const T* brow = b + p * bv.rs;
        if (bv.cs == 1) {
          for (int64_t j = 0; j < N; ++j) acc[j] = T(acc[j] + x * brow[j]);
        } else {
          for (int64_t j = 0; j < N; ++j) acc[j] = T(acc[j] + x * brow[j * bv.cs]);
        }
      }
      T* crow = c + i * N;
      if (beta == T(0)) {
        for (int64_t j = 0; j < N; ++j) crow[j] = T(alpha * acc[j]);
      } else {
        for (int64_t j = 0; j < N; ++j) crow[j] = T(beta * crow[j] + alpha * acc[j]);
      }
    }
  };
  if (nested) rows(0, av.rows);
  else parallel_for(av.rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, K * N)), rows);
}

template <typename T>
void gemm_one(T alpha, const T* a, const MatView& av, const T* b, const MatView& bv, T beta, T* c, bool nested) {
  if constexpr (std::is_floating_point_v<T>) gemm_float(alpha, a, av, b, bv, beta, c, nested);
  else gemm_int(alpha, a, av, b, bv, beta, c, nested);
}

// Element offset of every matrix of t (batch dims = all but the last two), row-major order.
std::vector<int64_t> batch_offsets(const Tensor& t) {
  const auto& sz = t.sizes();
  const auto& st = t.strides();
  const int64_t nb = t.dim() - 2;
  int64_t count = 1;
  for (int64_t d = 0; d < nb; ++d) count *= sz[d];
  std::vector<int64_t> offsets(static_cast<size_t>(count));
  std::vector<int64_t> idx(static_cast<size_t>(nb), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < count; ++i) {
    offsets[i] = off;
    for (int64_t d = nb - 1; d >= 0; --d) {
      if (++idx[d] < sz[d]) {
        off += st[d];
        break;
      }
      off -= st[d] * (sz[d] - 1);
      idx[d] = 0;
    }
  }
  return offsets;
}

// a: (batch..., M, K) seen as one (batch*M, K) matrix, when its strides allow it.
std::optional<MatView> fold_rows(const Tensor& a) {
  const auto& sz = a.sizes();
  const auto& st = a.strides();
  const int64_t nd = a.dim();
  int64_t rows = 1, rs = std::max<int64_t>(1, sz[nd - 1]), last_stride = 0, last_size = 0;
  bool any = false;
  for (int64_t d = nd - 2; d >= 0; --d) {
    if (sz[d] == 1) continue;
    if (!any) rs = st[d];
    else if (st[d] != last_stride * last_size) return std::nullopt;
    any = true;
    last_stride = st[d];
    last_size = sz[d];
    rows *= sz[d];
  }
  return MatView{rows, sz[nd - 1], rs, st[nd - 1]};
}

bool shared_across_batch(const Tensor& b) {
  for (int64_t d = 0; d + 2 < b.dim(); ++d)
    if (b.sizes()[d] != 1 && b.strides()[d] != 0) return false;
  return true;
}

template <typename T>
void run_batched(const Tensor& out, const Tensor& a, const Tensor& b, T alpha, T beta) {
  const MatView av = mat_view(a), bv = mat_view(b);
  const T* pa = a.data_ptr<T>();
  const T* pb = b.data_ptr<T>();
  T* pc = out.data_ptr<T>();
  if (out.dim() == 2) return gemm_one(alpha, pa, av, pb, bv, beta, pc, false);
  if (shared_across_batch(b)) {  // x (batch..., M, K) @ W (K, N): one tall GEMM
    const auto folded = fold_rows(a);
    if (folded && (!std::is_floating_point_v<T> || blas_compatible(*folded)))
      return gemm_one(alpha, pa, *folded, pb, bv, beta, pc, false);
  }
  const auto oa = batch_offsets(a), ob = batch_offsets(b);
  const int64_t count = static_cast<int64_t>(oa.size());
  const int64_t mn = av.rows * bv.cols, work = mn * av.cols;
  const int64_t grain = std::max<int64_t>(1, kBatchChunkWork / std::max<int64_t>(1, work));
  const bool spread = work <= kSingleThreadGemmWork && count >= grain && num_threads() > 1;
  if (spread) {
    parallel_for(count, grain, [&](int64_t b0, int64_t b1) {
      for (int64_t i = b0; i < b1; ++i) gemm_one(alpha, pa + oa[i], av, pb + ob[i], bv, beta, pc + i * mn, true);
    });
  } else {
    for (int64_t i = 0; i < count; ++i) gemm_one(alpha, pa + oa[i], av, pb + ob[i], bv, beta, pc + i * mn, false);
  }
}

}  // namespace

MatView mat_view(const Tensor& t) {
  const int64_t n = t.dim();
  QFLOW_ASSERT(n >= 2, "mat_view: expected at least 2 dims, got shape {}", t.sizes());
  return {t.sizes()[n - 2], t.sizes()[n - 1], t.strides()[n - 2], t.strides()[n - 1]};
}

bool blas_compatible(const MatView& m) {
  const auto layout = blas_layout(m);
  return layout.has_value() && layout->ld <= INT_MAX;
}

Tensor blas_ready(const Tensor& x) {
  if (!is_floating(x.dtype()) || blas_compatible(mat_view(x))) return x;
  return contiguous(x);
}

void batched_matmul(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha, const Scalar& beta) {
  const MatView av = mat_view(a), bv = mat_view(b);
  QFLOW_ASSERT(out.is_contiguous() && a.dtype() == out.dtype() && b.dtype() == out.dtype() && av.cols == bv.rows,
               "batched_matmul: bad operands {} {} {}", out.sizes(), a.sizes(), b.sizes());
  if (out.numel() == 0) return;
  if (av.cols == 0) {  // empty sums: out = beta * out
    Tensor o = out;
    if (beta.to_double() == 0) o.zero_();
    else o.mul_(beta);
    return;
  }
  QFLOW_CHECK(av.rows <= INT_MAX && av.cols <= INT_MAX && bv.cols <= INT_MAX,
              "matmul: matrix dimensions {}x{} @ {}x{} exceed the BLAS index range", av.rows, av.cols, bv.rows, bv.cols);
  // Operands the caller did not pass through blas_ready (a copy here may materialise a
  // broadcast: correct, only slower).
  const bool fp = is_floating(out.dtype());
  const Tensor A = fp && !blas_compatible(av) ? contiguous(a) : a;
  const Tensor B = fp && !blas_compatible(bv) ? contiguous(b) : b;
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) QFLOW_FAIL("matmul: bool tensors are not supported");
    else run_batched<T>(out, A, B, alpha.to<T>(), beta.to<T>());
  });
}

}  // namespace qflow::kernels
