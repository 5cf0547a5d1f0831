// Depthwise convolution (groups == C) as a direct stencil.
//
// Note [Depthwise convolution]
// With one input channel per group, the GEMMs of Note [Convolution as GEMM] degenerate to
// (multiplier x kH kW) @ (kH kW x B L) per channel: M = 1 and K = 9 for a 3x3 kernel, where
// BLAS spends its time packing, and im2col writes 9 copies of the input to read them once.
// Here every kernel tap instead adds w * (a shifted row of the input) to a row of the output:
// the input plane is read from cache kH kW times, inner loops are unit-stride (stride 1) and
// vectorise, and planes run in parallel. MobileNetV2's 3x3 depthwise layers take this path.
#include <vector>

#include "kernels/conv/im2col.h"

namespace qflow::kernels {

namespace {

// Calls fn(ih, oh, lo, hi, off_w) for every output row oh of tap (i, j) that reads input row
// ih, with [lo, hi) the output columns reading inside the input (input column q sW + off_w).
template <typename Fn>
void for_each_tap_row(const ConvGeometry& g, int64_t i, int64_t j, const Fn& fn) {
  const int64_t off_w = j * g.dw - g.pw;
  const auto [lo, hi] = valid_outputs(off_w, g.sw, g.w, g.ow);
  if (lo >= hi) return;
  for (int64_t oh = 0; oh < g.oh; ++oh) {
    const int64_t ih = oh * g.sh - g.ph + i * g.dh;
    if (ih >= 0 && ih < g.h) fn(ih, oh, lo, hi, off_w);
  }
}

// Sum of p[0, n) with 8 independent partial sums (vectorisable, see conv_backward.cpp).
template <typename T>
T row_sum(const T* p, int64_t n) {
  T part[8] = {};
  int64_t q = 0;
  for (; q + 8 <= n; q += 8)
    for (int k = 0; k < 8; ++k) part[k] += p[q + k];
  T s = 0;
  for (; q < n; ++q) s += p[q];
  for (int k = 0; k < 8; ++k) s += part[k];
  return s;
}

}  // namespace

// One task per output plane (n, o); it reads input plane (n, o / multiplier).
template <typename T>
void depthwise_forward(const ConvGeometry& g, const T* x, const T* w, const T* bias, T* y) {
  const int64_t L = g.l(), hw = g.h * g.w, taps = g.kh * g.kw, mult = g.og();
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(taps * L, 1));
  parallel_for(g.n * g.o, grain, [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t n = plane / g.o, o = plane % g.o;
      const T* in = x + (n * g.c + o / mult) * hw;
      T* out = y + plane * L;
      std::fill(out, out + L, bias ? bias[o] : T(0));
      for (int64_t i = 0; i < g.kh; ++i) {
        for (int64_t j = 0; j < g.kw; ++j) {
          const T wv = w[o * taps + i * g.kw + j];
          for_each_tap_row(g, i, j, [&](int64_t ih, int64_t oh, int64_t lo, int64_t hi, int64_t off_w) {
            const T* src = in + ih * g.w;
            T* dst = out + oh * g.ow;
            if (g.sw == 1) {
              const T* s = src + off_w + lo;  // in bounds: lo + off_w >= 0
              for (int64_t q = 0; q < hi - lo; ++q) dst[lo + q] += wv * s[q];
            } else {
              for (int64_t q = lo; q < hi; ++q) dst[q] += wv * src[q * g.sw + off_w];
            }
          });
        }
      }
    }
  });
}

// Grad input: one task per input plane (n, c), gathering its `multiplier` output planes.
// Grad weight: one task per output channel o, summing over the batch into one row of partial
// sums per tap (vectorisable; each row is reduced once at the end).
template <typename T>
void depthwise_backward(const ConvGeometry& g, const T* gy, const T* x, const T* w, T* gx, T* gw) {
  const int64_t L = g.l(), hw = g.h * g.w, taps = g.kh * g.kw, mult = g.og();
  if (gx) {
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(mult * taps * L + hw, 1));
    parallel_for(g.n * g.c, grain, [&](int64_t begin, int64_t end) {
      for (int64_t plane = begin; plane < end; ++plane) {
        const int64_t n = plane / g.c, c = plane % g.c;
        T* dx = gx + plane * hw;
        std::fill(dx, dx + hw, T(0));
        for (int64_t o = c * mult; o < (c + 1) * mult; ++o) {
          const T* dy = gy + (n * g.o + o) * L;
          for (int64_t i = 0; i < g.kh; ++i) {
            for (int64_t j = 0; j < g.kw; ++j) {
              const T wv = w[o * taps + i * g.kw + j];
              for_each_tap_row(g, i, j, [&](int64_t ih, int64_t oh, int64_t lo, int64_t hi, int64_t off_w) {
                T* row = dx + ih * g.w;
                const T* src = dy + oh * g.ow;
                if (g.sw == 1) {
                  T* d = row + off_w + lo;
                  for (int64_t q = 0; q < hi - lo; ++q) d[q] += wv * src[lo + q];
                } else {
                  for (int64_t q = lo; q < hi; ++q) row[q * g.sw + off_w] += wv * src[q];
                }
              });
            }
          }
        }
      }
    });
  }
  if (gw) {
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(g.n * taps * L, 1));
    parallel_for(g.o, grain, [&](int64_t begin, int64_t end) {
      std::vector<T> acc(static_cast<size_t>(taps * g.ow));
      for (int64_t o = begin; o < end; ++o) {
        std::fill(acc.begin(), acc.end(), T(0));
        for (int64_t n = 0; n < g.n; ++n) {  // both planes stay in cache across the taps
          const T* in = x + (n * g.c + o / mult) * hw;
          const T* dy = gy + (n * g.o + o) * L;
          for (int64_t i = 0; i < g.kh; ++i) {
            for (int64_t j = 0; j < g.kw; ++j) {
              T* a = acc.data() + (i * g.kw + j) * g.ow;
              for_each_tap_row(g, i, j, [&](int64_t ih, int64_t oh, int64_t lo, int64_t hi, int64_t off_w) {
                const T* src = in + ih * g.w;
                const T* d = dy + oh * g.ow;
                if (g.sw == 1) {
                  const T* s = src + off_w + lo;
                  for (int64_t q = 0; q < hi - lo; ++q) a[lo + q] += s[q] * d[lo + q];
                } else {
                  for (int64_t q = lo; q < hi; ++q) a[q] += src[q * g.sw + off_w] * d[q];
                }
              });
            }
          }
        }
        for (int64_t t = 0; t < taps; ++t) gw[o * taps + t] = row_sum(acc.data() + t * g.ow, g.ow);
      }
    });
  }
}

template void depthwise_forward<float>(const ConvGeometry&, const float*, const float*, const float*, float*);
template void depthwise_forward<double>(const ConvGeometry&, const double*, const double*, const double*, double*);
template void depthwise_backward<float>(const ConvGeometry&, const float*, const float*, const float*, float*, float*);
template void depthwise_backward<double>(const ConvGeometry&, const double*, const double*, const double*, double*,
                                         double*);

}  // namespace qflow::kernels
