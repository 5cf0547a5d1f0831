// Convolution geometry, im2col/col2im and the GEMM wrapper. See Note [Convolution as GEMM].
#include "kernels/conv/im2col.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "qflow/core/parallel.h"
#include "kernels/common/spatial_utils.h"

namespace qflow::kernels {

namespace {

// A chunk batches images until its GEMM is at least this wide: narrower GEMMs (late ResNet
// layers have 16 positions per image) spend their time packing, while 16k-column chunks of
// the wide early layers fall out of cache and were slower again (qflow-bench-conv).
constexpr int64_t kTargetColumns = 2048;
// ... or until its column buffer holds this many bytes, so shallow convs (the 3-channel
// stem, 1x1 downsamples) run few, large chunks instead of many tiny parallel steps.
constexpr int64_t kTargetColumnBytes = int64_t{4} << 20;
// Upper bound on the column buffer of one chunk (one image is always allowed).
constexpr int64_t kMaxColumnBytes = int64_t{64} << 20;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::vector<int64_t> ConvGeometry::output_sizes() const {
  if (batched) return {n, o, oh, ow};
  return {o, oh, ow};
}

int64_t ConvGeometry::chunk_images(size_t element_size) const {
  const int64_t per_image = std::max<int64_t>(1, c * kh * kw * l() * static_cast<int64_t>(element_size));
  const int64_t wanted = std::max(ceil_div(kTargetColumns, std::max<int64_t>(1, l())), kTargetColumnBytes / per_image);
  const int64_t by_memory = std::max<int64_t>(1, kMaxColumnBytes / per_image);
  return std::max<int64_t>(1, std::min({n, wanted, by_memory}));
}

bool ConvGeometry::direct_pointwise() const { return pointwise() && (n == 1 || l() >= kTargetColumns); }

ConvGeometry conv_geometry(const std::vector<int64_t>& input, const std::vector<int64_t>& weight, const IntList& stride,
                           const IntList& padding, const IntList& dilation, int64_t groups, std::string_view op) {
  QFLOW_CHECK(input.size() == 3 || input.size() == 4,
              "{}: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got input of shape {}", op, input);
  QFLOW_CHECK(weight.size() == 4, "{}: expected a 4-D weight (O, C / groups, kH, kW), got weight of shape {}", op, weight);
  QFLOW_CHECK(groups > 0, "{}: groups must be positive, got {}", op, groups);
  ConvGeometry g;
  g.batched = input.size() == 4;
  const size_t b = g.batched ? 1 : 0;
  g.n = g.batched ? input[0] : 1;
  g.c = input[b];
  g.h = input[b + 1];
  g.w = input[b + 2];
  g.o = weight[0];
  g.kh = weight[2];
  g.kw = weight[3];
  g.groups = groups;
  QFLOW_CHECK(g.o % groups == 0, "{}: groups={} does not divide the {} output channels of weight of shape {}", op, groups,
              g.o, weight);
  QFLOW_CHECK(g.c % groups == 0, "{}: groups={} does not divide the {} channels of input of shape {}", op, groups, g.c,
              input);
  QFLOW_CHECK(weight[1] * groups == g.c, "{}: expected input with {} channels for weight of shape {} and groups={}, got input of shape {}",
              op, weight[1] * groups, weight, groups, input);
  QFLOW_CHECK(g.kh > 0 && g.kw > 0 && g.o > 0, "{}: weight of shape {} is empty", op, weight);
  std::tie(g.sh, g.sw) = expand_pair(stride, "stride", op);
  std::tie(g.ph, g.pw) = expand_pair(padding, "padding", op);
  std::tie(g.dh, g.dw) = expand_pair(dilation, "dilation", op);
  QFLOW_CHECK(g.sh > 0 && g.sw > 0, "{}: stride must be positive, got {}", op, stride);
  QFLOW_CHECK(g.dh > 0 && g.dw > 0, "{}: dilation must be positive, got {}", op, dilation);
  QFLOW_CHECK(g.ph >= 0 && g.pw >= 0, "{}: padding must be non-negative, got {}", op, padding);
  const int64_t eh = g.dh * (g.kh - 1) + 1, ew = g.dw * (g.kw - 1) + 1;  // dilated kernel extent
  QFLOW_CHECK(eh <= g.h + 2 * g.ph && ew <= g.w + 2 * g.pw,
              "{}: kernel of size [{}, {}] (dilation {}, extent [{}, {}]) is larger than the padded input of size [{}, {}] "
              "(input of shape {}, padding {})",
              op, g.kh, g.kw, dilation, eh, ew, g.h + 2 * g.ph, g.w + 2 * g.pw, input, padding);
  g.oh = (g.h + 2 * g.ph - eh) / g.sh + 1;
  g.ow = (g.w + 2 * g.pw - ew) / g.sw + 1;
  return g;
}

// x: (B, C, H, W) → col: (C kH kW, B L). One task per (row, image): a contiguous run of L.
template <typename T>
void im2col(const ConvGeometry& g, const T* x, int64_t images, T* col) {
  const int64_t L = g.l(), width = images * L, rows = g.c * g.kh * g.kw;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(L, 1));
  parallel_for(rows * images, grain, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t r = task / images, b = task % images;
      const int64_t c = r / (g.kh * g.kw), i = (r / g.kw) % g.kh, j = r % g.kw;
      const T* plane = x + (b * g.c + c) * g.h * g.w;
      T* dst = col + r * width + b * L;
      const int64_t off_w = j * g.dw - g.pw;
      const auto [lo, hi] = valid_outputs(off_w, g.sw, g.w, g.ow);
      for (int64_t oh = 0; oh < g.oh; ++oh, dst += g.ow) {
        const int64_t ih = oh * g.sh - g.ph + i * g.dh;
        if (ih < 0 || ih >= g.h) {
          std::fill(dst, dst + g.ow, T(0));
          continue;
        }
        const T* src = plane + ih * g.w;  // input column of output q: q * sW + off_w
        std::fill(dst, dst + lo, T(0));
        if (g.sw == 1) {
          std::memcpy(dst + lo, src + lo + off_w, static_cast<size_t>(hi - lo) * sizeof(T));
        } else {
          for (int64_t q = lo; q < hi; ++q) dst[q] = src[q * g.sw + off_w];
        }
        std::fill(dst + hi, dst + g.ow, T(0));
      }
    }
  });
}

// col: (C kH kW, B L) → dx: (B, C, H, W). One task per input plane, so no two threads
// accumulate into the same pixel.
template <typename T>
void col2im(const ConvGeometry& g, const T* col, int64_t images, T* dx) {
  const int64_t L = g.l(), width = images * L, hw = g.h * g.w;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(g.kh * g.kw * L, 1));
  parallel_for(images * g.c, grain, [&](int64_t begin, int64_t end) {
    for (int64_t plane_idx = begin; plane_idx < end; ++plane_idx) {
      const int64_t b = plane_idx / g.c, c = plane_idx % g.c;
      T* plane = dx + plane_idx * hw;
      std::fill(plane, plane + hw, T(0));
      for (int64_t i = 0; i < g.kh; ++i) {
        for (int64_t j = 0; j < g.kw; ++j) {
          const int64_t r = (c * g.kh + i) * g.kw + j;
          const T* src = col + r * width + b * L;
          const int64_t off_w = j * g.dw - g.pw;
          const auto [lo, hi] = valid_outputs(off_w, g.sw, g.w, g.ow);
          for (int64_t oh = 0; oh < g.oh; ++oh, src += g.ow) {
            const int64_t ih = oh * g.sh - g.ph + i * g.dh;
            if (ih < 0 || ih >= g.h) continue;
            T* row = plane + ih * g.w;
            if (g.sw == 1) {
              T* shifted = row + off_w + lo;  // in bounds: lo + off_w >= 0
              for (int64_t q = 0; q < hi - lo; ++q) shifted[q] += src[lo + q];
            } else {
              for (int64_t q = lo; q < hi; ++q) row[q * g.sw + off_w] += src[q];
            }
          }
        }
      }
    }
  });
}

template <typename T>
void swap_outer_dims(const T* src, int64_t a, int64_t b, int64_t l, const T* bias, T* dst) {
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(l, 1));
  parallel_for(a * b, grain, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t ia = task / b, ib = task % b;
      const T* s = src + task * l;
      T* d = dst + (ib * a + ia) * l;
      if (bias) {
        const T v = bias[ia];
        for (int64_t k = 0; k < l; ++k) d[k] = s[k] + v;
      } else {
        std::memcpy(d, s, static_cast<size_t>(l) * sizeof(T));
      }
    }
  });
}

namespace {

void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  use_best_openblas_kernels();
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b,
              static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
               const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  use_best_openblas_kernels();
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b,
              static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

// Below this many multiply-adds a GEMM is not split (OpenBLAS's own threading threshold).
constexpr int64_t kSplitGemmWork = 65536 * 4;
// Blocks are multiples of this many rows / columns (whole register tiles and cache lines).
constexpr int64_t kBlockAlign = 32;

}  // namespace

SingleThreadedBlas::SingleThreadedBlas() { openblas_set_num_threads(1); }
SingleThreadedBlas::~SingleThreadedBlas() { openblas_set_num_threads(num_threads()); }

// Splits the larger of C's two dims into one aligned block per thread.
template <typename T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b, int64_t ldb,
          T beta, T* c, int64_t ldc) {
  const int64_t threads = num_threads();
  const int64_t dim = std::max(m, n);
  if (threads == 1 || omp_in_parallel() || m * n * k <= kSplitGemmWork || dim < 2 * kBlockAlign) {
    blas_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const int64_t block = ceil_div(ceil_div(dim, threads), kBlockAlign) * kBlockAlign;
  parallel_for(ceil_div(dim, block), 1, [&](int64_t begin, int64_t end) {
    for (int64_t blk = begin; blk < end; ++blk) {
      const int64_t i0 = blk * block, len = std::min(block, dim - i0);
      if (n >= m) {  // columns [i0, i0 + len) of C: the same columns of op(B)
        blas_gemm(ta, tb, m, len, k, alpha, a, lda, tb ? b + i0 * ldb : b + i0, ldb, beta, c + i0, ldc);
      } else {       // rows [i0, i0 + len) of C: the same rows of op(A)
        blas_gemm(ta, tb, len, n, k, alpha, ta ? a + i0 : a + i0 * lda, lda, b, ldb, beta, c + i0 * ldc, ldc);
      }
    }
  });
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                          float, float*, int64_t);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t, const double*, int64_t,
                           double, double*, int64_t);
template void im2col<float>(const ConvGeometry&, const float*, int64_t, float*);
template void im2col<double>(const ConvGeometry&, const double*, int64_t, double*);
template void col2im<float>(const ConvGeometry&, const float*, int64_t, float*);
template void col2im<double>(const ConvGeometry&, const double*, int64_t, double*);
template void swap_outer_dims<float>(const float*, int64_t, int64_t, int64_t, const float*, float*);
template void swap_outer_dims<double>(const double*, int64_t, int64_t, int64_t, const double*, double*);

}  // namespace qflow::kernels
