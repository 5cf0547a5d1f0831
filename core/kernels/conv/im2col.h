#pragma once
// Convolution geometry, im2col/col2im and a raw-pointer GEMM for conv.cpp and
// conv_backward.cpp (internal to core's kernels).
//
// Note [Convolution as GEMM]
// A chunk of B images is unfolded into a column matrix col: (C * kH * kW, B * L), L = Ho * Wo,
// row (c, i, j) holding input pixel (c, oh * sH - pH + i * dH, ow * sW - pW + j * dW) of every
// output position (zero in the padding). Rows of group g are the contiguous block
// [g * Kg, (g + 1) * Kg), Kg = C / groups * kH * kW, so per group
//   forward      Y_g  (Og, B L) = W_g (Og, Kg) @ col_g (Kg, B L)
//   grad weight  dW_g (Og, Kg) += dY_g (Og, B L) @ col_g^T
//   grad input   dcol_g (Kg, B L) = W_g^T @ dY_g, then col2im folds dcol back onto dX.
// Images are batched into one GEMM so that late layers with tiny planes (4 x 4) still give
// BLAS wide matrices; Y / dY are (O, B, L) then and are moved from / to the (B, O, L) layout
// of NCHW once per chunk. im2col/col2im are parallel loops and each GEMM is split over the
// same threads (see Note [Threads in conv]).
// A 1x1, stride-1, unpadded conv needs no unfolding at all: the input plane (C, H W) is col.
// Depthwise convs (groups == C) skip GEMM altogether: see Note [Depthwise convolution].
#include <algorithm>
#include <cstddef>
#include <string_view>
#include <utility>
#include <vector>

#include "qflow/core/parallel.h"
#include "qflow/core/tensor.h"

namespace qflow::kernels {

/// Sizes and hyper-parameters of one 2-D convolution, validated.
struct ConvGeometry {
  int64_t n = 1, c = 0, h = 0, w = 0;  // input (n = 1 for an unbatched input)
  int64_t o = 0, kh = 0, kw = 0;       // weight (O, C / groups, kH, kW)
  int64_t groups = 1;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t oh = 0, ow = 0;  // output plane
  bool batched = true;     // input was 4-D

  int64_t cg() const { return c / groups; }
  int64_t og() const { return o / groups; }
  int64_t kg() const { return cg() * kh * kw; }  // GEMM depth per group
  int64_t l() const { return oh * ow; }          // output positions per image
  /// One input channel per group (groups == C): run as a direct stencil, see
  /// Note [Depthwise convolution].
  bool depthwise() const { return groups > 1 && groups == c; }
  /// 1x1, stride 1, no padding: the input plane is already the column matrix.
  bool pointwise() const { return kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
  /// Pointwise with a GEMM per image that is wide enough as it is (or a single image):
  /// multiply the input planes directly, without copying them into a column buffer.
  bool direct_pointwise() const;
  /// Output sizes, (N, O, Ho, Wo) or (O, Ho, Wo).
  std::vector<int64_t> output_sizes() const;
  /// Images per GEMM chunk (see Note [Convolution as GEMM]).
  int64_t chunk_images(size_t element_size) const;
};

/// Output positions [lo, hi) of one row whose input position o * stride + off lies in [0, size).
inline std::pair<int64_t, int64_t> valid_outputs(int64_t off, int64_t stride, int64_t size, int64_t out) {
  const int64_t lo = off >= 0 ? 0 : std::min(out, (-off + stride - 1) / stride);
  const int64_t hi = size - off <= 0 ? 0 : std::min(out, (size - off + stride - 1) / stride);
  return {lo, std::max(lo, hi)};
}

/// Validates input (N, C, H, W) / (C, H, W) against weight (O, C / groups, kH, kW) and the
/// hyper-parameters; errors name `op` and the offending shapes or values.
ConvGeometry conv_geometry(const std::vector<int64_t>& input, const std::vector<int64_t>& weight, const IntList& stride,
                           const IntList& padding, const IntList& dilation, int64_t groups, std::string_view op);

/// x: (B, C, H, W) → col: (C * kH * kW, B * L), zeros where the window reads padding.
template <typename T>
void im2col(const ConvGeometry& g, const T* x, int64_t images, T* col);

/// col: (C * kH * kW, B * L) → dx: (B, C, H, W) overwritten with the sum of all column
/// entries that read each pixel (the adjoint of im2col).
template <typename T>
void col2im(const ConvGeometry& g, const T* col, int64_t images, T* dx);

/// src: (A, B, L) → dst: (B, A, L), adding bias[a] to every element of (., a, .) when bias is
/// non-null. Moves GEMM results between the (O, B, L) and NCHW (B, O, L) layouts.
template <typename T>
void swap_outer_dims(const T* src, int64_t a, int64_t b, int64_t l, const T* bias, T* dst);

/// Depthwise forward: x (N, C, H, W), w (O, 1, kH, kW), bias (O,) or null → y (N, O, Ho, Wo).
template <typename T>
void depthwise_forward(const ConvGeometry& g, const T* x, const T* w, const T* bias, T* y);

/// Depthwise backward: gy (N, O, Ho, Wo) → gx (like x) and gw (like w), each when non-null.
template <typename T>
void depthwise_backward(const ConvGeometry& g, const T* gy, const T* x, const T* w, T* gx, T* gw);

/// Note [Threads in conv]
/// libgomp's idle workers spin for a while after every parallel region (GOMP_SPINCOUNT,
/// milliseconds on CPUs with a slow `pause`), and OpenBLAS's pthread pool wants those very
/// cores for the GEMM that follows im2col: on 2 cores that cost up to 40x on small convs.
/// So a conv kernel keeps all its parallelism in OpenMP: im2col/col2im loops, and its GEMMs
/// split into per-thread blocks of C, each computed by OpenBLAS held on one thread for the
/// duration of the kernel (this guard). Restores OpenBLAS to num_threads() on exit.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas();
  ~SingleThreadedBlas();
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;
};

/// Runs fn(group) for every group's GEMM of `gemm_work` multiply-adds: small GEMMs (at most
/// 65536 * 4 multiply-adds, OpenBLAS's own threshold for threading) run in parallel, one
/// group per thread; large ones one by one, each split over the threads by gemm(). Groups
/// write disjoint outputs.
template <typename Fn>
void for_each_group(int64_t groups, int64_t gemm_work, const Fn& fn) {
  constexpr int64_t kSingleThreadGemmWork = 65536 * 4;
  if (groups > 1 && gemm_work <= kSingleThreadGemmWork) {
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(gemm_work, 1));
    parallel_for(groups, grain, [&](int64_t begin, int64_t end) {
      for (int64_t grp = begin; grp < end; ++grp) fn(grp);
    });
  } else {
    for (int64_t grp = 0; grp < groups; ++grp) fn(grp);
  }
}

/// Row-major C (M, N) = alpha * op(A) @ op(B) + beta * C through cblas_sgemm / cblas_dgemm.
/// Large products are split into one block of C's rows or columns per thread (see
/// Note [Threads in conv]); inside a parallel region, or when small, one call.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc);

}  // namespace qflow::kernels
