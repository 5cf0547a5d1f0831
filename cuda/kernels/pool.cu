// 2-D pooling on the GPU: max (with argmax), average and adaptive average, and their
// gradients. See Note [Pooling on the GPU] in pool.cuh. Window and divisor rules are the CPU
// kernel's (core/kernels/nn/pool.cpp), line for line.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "kernels/launch_config.cuh"
#include "kernels/pool.cuh"

namespace qflow::cuda::pool {
namespace {

constexpr int kThreads = 256;


unsigned blocks_for(int64_t total) { return grid_blocks(total, kThreads); }

// (n, c, h, w) of element i of a dense (N, C, H, W) tensor in NCHW or channels-last order.
template <bool CL>
__device__ __forceinline__ void decompose(int64_t i, int64_t C, int64_t H, int64_t W, int64_t& n, int64_t& c,
                                          int64_t& h, int64_t& w) {
  if constexpr (CL) {
    c = i % C;
    i /= C;
    w = i % W;
    i /= W;
    h = i % H;
    n = i / H;
  } else {
    w = i % W;
    i /= W;
    h = i % H;
    i /= H;
    c = i % C;
    n = i / C;
  }
}

#define QFLOW_GRID_STRIDE(i, total)                                                                         \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (total);                \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// ---- max ---------------------------------------------------------------------------------------

// NaN wins (a later NaN too), like the CPU; the first index is kept on ties.
template <typename T, bool CL>
__global__ void __launch_bounds__(kThreads) max_fwd(const T* __restrict__ x, Strides4 xs, T* __restrict__ y,
                                                    int64_t* __restrict__ idx, Geometry g, int64_t total) {
  QFLOW_GRID_STRIDE(i, total) {
    int64_t n, c, oh, ow;
    decompose<CL>(i, g.C, g.OH, g.OW, n, c, oh, ow);
    const T* in = x + n * xs.n + c * xs.c;
    int64_t h0 = oh * g.sh - g.ph;
    const int64_t h1 = min(h0 + (g.kh - 1) * g.dh + 1, g.H);
    while (h0 < 0) h0 += g.dh;
    int64_t w0 = ow * g.sw - g.pw;
    const int64_t w1 = min(w0 + (g.kw - 1) * g.dw + 1, g.W);
    while (w0 < 0) w0 += g.dw;
    int64_t best = h0 * g.W + w0;
    T best_v = -static_cast<T>(INFINITY);
    for (int64_t ih = h0; ih < h1; ih += g.dh) {
      for (int64_t iw = w0; iw < w1; iw += g.dw) {
        const T v = in[ih * xs.h + iw * xs.w];
        if (v > best_v || v != v) {
          best_v = v;
          best = ih * g.W + iw;
        }
      }
    }
    y[i] = best_v;
    if (idx) idx[i] = best;
  }
}

template <typename T, bool CL>
__global__ void __launch_bounds__(kThreads) max_bwd(const T* __restrict__ gy, Strides4 gs,
                                                    const int64_t* __restrict__ idx, Strides4 is, T* __restrict__ gx,
                                                    Geometry g, int64_t total) {
  QFLOW_GRID_STRIDE(i, total) {
    int64_t n, c, ih, iw;
    decompose<CL>(i, g.C, g.H, g.W, n, c, ih, iw);
    const int64_t pos = ih * g.W + iw;
    // Outputs whose window can hold (ih, iw): oh*sh - ph <= ih <= oh*sh - ph + (kh-1)*dh.
    const int64_t lo_h = ih + g.ph - (g.kh - 1) * g.dh, lo_w = iw + g.pw - (g.kw - 1) * g.dw;
    const int64_t oh0 = lo_h <= 0 ? 0 : (lo_h + g.sh - 1) / g.sh;
    const int64_t ow0 = lo_w <= 0 ? 0 : (lo_w + g.sw - 1) / g.sw;
    const int64_t oh1 = min(g.OH - 1, (ih + g.ph) / g.sh);
    const int64_t ow1 = min(g.OW - 1, (iw + g.pw) / g.sw);
    const int64_t* ip = idx + n * is.n + c * is.c;
    const T* gp = gy + n * gs.n + c * gs.c;
    T acc = T(0);
    for (int64_t oh = oh0; oh <= oh1; ++oh)
      for (int64_t ow = ow0; ow <= ow1; ++ow)
        if (ip[oh * is.h + ow * is.w] == pos) acc += gp[oh * gs.h + ow * gs.w];
    gx[i] = acc;
  }
}

// ---- average -----------------------------------------------------------------------------------

struct Window {
  int64_t h0, h1, w0, w1, divisor;
};

// The CPU's for_each_avg_window: the window clipped to the input, and PyTorch's divisor.
__device__ __forceinline__ Window avg_window(const Geometry& g, const AvgOptions& o, int64_t oh, int64_t ow) {
  const int64_t hs = oh * g.sh - g.ph, he = min(hs + g.kh, g.H + g.ph);
  const int64_t ws = ow * g.sw - g.pw, we = min(ws + g.kw, g.W + g.pw);
  Window r;
  r.h0 = max(hs, int64_t(0));
  r.h1 = min(he, g.H);
  r.w0 = max(ws, int64_t(0));
  r.w1 = min(we, g.W);
  r.divisor = (he - hs) * (we - ws);
  if (o.has_divisor) r.divisor = o.divisor;
  else if (!o.count_include_pad) r.divisor = (r.h1 - r.h0) * (r.w1 - r.w0);
  return r;
}

template <typename T, bool CL>
__global__ void __launch_bounds__(kThreads) avg_fwd(const T* __restrict__ x, Strides4 xs, T* __restrict__ y, Geometry g,
                                                    AvgOptions o, int64_t total) {
  QFLOW_GRID_STRIDE(i, total) {
    int64_t n, c, oh, ow;
    decompose<CL>(i, g.C, g.OH, g.OW, n, c, oh, ow);
    const T* in = x + n * xs.n + c * xs.c;
    const Window win = avg_window(g, o, oh, ow);
    T s = T(0);
    for (int64_t ih = win.h0; ih < win.h1; ++ih)
      for (int64_t iw = win.w0; iw < win.w1; ++iw) s += in[ih * xs.h + iw * xs.w];
    y[i] = win.h0 < win.h1 && win.w0 < win.w1 ? s / static_cast<T>(win.divisor) : T(0);
  }
}

template <typename T, bool CL>
__global__ void __launch_bounds__(kThreads) avg_bwd(const T* __restrict__ gy, Strides4 gs, T* __restrict__ gx,
                                                    Geometry g, AvgOptions o, int64_t total) {
  QFLOW_GRID_STRIDE(i, total) {
    int64_t n, c, ih, iw;
    decompose<CL>(i, g.C, g.H, g.W, n, c, ih, iw);
    // Outputs whose unclipped window [oh*sh - ph, oh*sh - ph + kh) holds ih.
    const int64_t lh = ih + g.ph - g.kh, lw = iw + g.pw - g.kw;
    const int64_t oh0 = lh < 0 ? 0 : lh / g.sh + 1, ow0 = lw < 0 ? 0 : lw / g.sw + 1;
    const int64_t oh1 = min(g.OH - 1, (ih + g.ph) / g.sh), ow1 = min(g.OW - 1, (iw + g.pw) / g.sw);
    const T* gp = gy + n * gs.n + c * gs.c;
    T acc = T(0);
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const Window win = avg_window(g, o, oh, ow);
        if (ih >= win.h0 && ih < win.h1 && iw >= win.w0 && iw < win.w1)
          acc += gp[oh * gs.h + ow * gs.w] / static_cast<T>(win.divisor);
      }
    }
    gx[i] = acc;
  }
}

// ---- adaptive average ------------------------------------------------------------------------------

__device__ __forceinline__ int64_t ad_start(int64_t i, int64_t out, int64_t in) { return (i * in) / out; }
__device__ __forceinline__ int64_t ad_end(int64_t i, int64_t out, int64_t in) { return ((i + 1) * in + out - 1) / out; }

template <typename T, bool CL>
__global__ void __launch_bounds__(kThreads) adaptive_fwd(const T* __restrict__ x, Strides4 xs, T* __restrict__ y,
                                                         Geometry g, int64_t total) {
  QFLOW_GRID_STRIDE(i, total) {
    int64_t n, c, oh, ow;
    decompose<CL>(i, g.C, g.OH, g.OW, n, c, oh, ow);
    const T* in = x + n * xs.n + c * xs.c;
    const int64_t h0 = ad_start(oh, g.OH, g.H), h1 = ad_end(oh, g.OH, g.H);
    const int64_t w0 = ad_start(ow, g.OW, g.W), w1 = ad_end(ow, g.OW, g.W);
    T s = T(0);
    for (int64_t ih = h0; ih < h1; ++ih)
      for (int64_t iw = w0; iw < w1; ++iw) s += in[ih * xs.h + iw * xs.w];
    y[i] = s / static_cast<T>((h1 - h0) * (w1 - w0));
  }
}

// Global average of contiguous NCHW planes of HW elements: a warp per plane, 128-bit loads when
// the planes allow them.
template <typename T>
__global__ void __launch_bounds__(kThreads) global_avg_planes(const T* __restrict__ x, int64_t planes, int64_t HW,
                                                              T* __restrict__ y) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  constexpr int V = 16 / sizeof(T);
  const bool vec = HW % V == 0 && (reinterpret_cast<uintptr_t>(x) % 16) == 0;
  for (int64_t p = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; p < planes; p += warps) {
    const T* in = x + p * HW;
    T s = T(0);
    if (vec) {
      struct alignas(16) Pack {
        T v[V];
      };
      const Pack* pv = reinterpret_cast<const Pack*>(in);
      for (int64_t k = lane; k < HW / V; k += 32) {
        const Pack a = pv[k];
#pragma unroll
        for (int v = 0; v < V; ++v) s += a.v[v];
      }
    } else {
      for (int64_t k = lane; k < HW; k += 32) s += in[k];
    }
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    if (lane == 0) y[p] = s / static_cast<T>(HW);
  }
}

template <typename T, bool CL>
__global__ void __launch_bounds__(kThreads) adaptive_bwd(const T* __restrict__ gy, Strides4 gs, T* __restrict__ gx,
                                                         Geometry g, int64_t total) {
  QFLOW_GRID_STRIDE(i, total) {
    int64_t n, c, ih, iw;
    decompose<CL>(i, g.C, g.H, g.W, n, c, ih, iw);
    const int64_t oh0 = max(int64_t(0), (ih * g.OH) / g.H - 1), ow0 = max(int64_t(0), (iw * g.OW) / g.W - 1);
    const int64_t oh1 = min(g.OH - 1, ((ih + 1) * g.OH + g.H - 1) / g.H);
    const int64_t ow1 = min(g.OW - 1, ((iw + 1) * g.OW + g.W - 1) / g.W);
    const T* gp = gy + n * gs.n + c * gs.c;
    T acc = T(0);
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      const int64_t h0 = ad_start(oh, g.OH, g.H), h1 = ad_end(oh, g.OH, g.H);
      if (ih < h0 || ih >= h1) continue;
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const int64_t w0 = ad_start(ow, g.OW, g.W), w1 = ad_end(ow, g.OW, g.W);
        if (iw < w0 || iw >= w1) continue;
        acc += gp[oh * gs.h + ow * gs.w] / static_cast<T>((h1 - h0) * (w1 - w0));
      }
    }
    gx[i] = acc;
  }
}

// ---- dispatch ------------------------------------------------------------------------------------

template <typename Fn>
void by_type(Scalar s, Fn&& fn) {
  if (s == Scalar::F32) fn(float{});
  else fn(double{});
}

}  // namespace

void max_forward(Scalar s, const Geometry& g, const void* x, Strides4 xs, void* y, int64_t* idx, bool cl,
                 cudaStream_t stream) {
  const int64_t total = g.N * g.C * g.OH * g.OW;
  if (total == 0) return;
  by_type(s, [&](auto tag) {
    using T = decltype(tag);
    if (cl) max_fwd<T, true><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(x), xs, static_cast<T*>(y), idx, g, total);
    else max_fwd<T, false><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(x), xs, static_cast<T*>(y), idx, g, total);
  });
}

void max_backward(Scalar s, const Geometry& g, const void* gy, Strides4 gys, const int64_t* idx, Strides4 is, void* gx,
                  bool cl, cudaStream_t stream) {
  const int64_t total = g.N * g.C * g.H * g.W;
  if (total == 0) return;
  by_type(s, [&](auto tag) {
    using T = decltype(tag);
    if (cl) max_bwd<T, true><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(gy), gys, idx, is, static_cast<T*>(gx), g, total);
    else max_bwd<T, false><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(gy), gys, idx, is, static_cast<T*>(gx), g, total);
  });
}

void avg_forward(Scalar s, const Geometry& g, const AvgOptions& o, const void* x, Strides4 xs, void* y, bool cl,
                 cudaStream_t stream) {
  const int64_t total = g.N * g.C * g.OH * g.OW;
  if (total == 0) return;
  by_type(s, [&](auto tag) {
    using T = decltype(tag);
    if (cl) avg_fwd<T, true><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(x), xs, static_cast<T*>(y), g, o, total);
    else avg_fwd<T, false><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(x), xs, static_cast<T*>(y), g, o, total);
  });
}

void avg_backward(Scalar s, const Geometry& g, const AvgOptions& o, const void* gy, Strides4 gys, void* gx, bool cl,
                  cudaStream_t stream) {
  const int64_t total = g.N * g.C * g.H * g.W;
  if (total == 0) return;
  by_type(s, [&](auto tag) {
    using T = decltype(tag);
    if (cl) avg_bwd<T, true><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(gy), gys, static_cast<T*>(gx), g, o, total);
    else avg_bwd<T, false><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(gy), gys, static_cast<T*>(gx), g, o, total);
  });
}

void adaptive_avg_forward(Scalar s, const Geometry& g, const void* x, Strides4 xs, void* y, bool cl,
                          cudaStream_t stream) {
  const int64_t total = g.N * g.C * g.OH * g.OW;
  if (total == 0) return;
  const int64_t HW = g.H * g.W;
  // The global average of contiguous NCHW planes (ResNet's head): a warp per plane. Its output
  // (N, C, 1, 1) has the same memory order in either layout.
  const bool planes = g.OH == 1 && g.OW == 1 && HW >= 64 && xs.w == 1 && xs.h == g.W && xs.c == HW &&
                      (g.N == 1 || xs.n == g.C * HW);
  by_type(s, [&](auto tag) {
    using T = decltype(tag);
    if (planes) {
      const int64_t P = g.N * g.C;
      global_avg_planes<T><<<blocks_for(P * 32), kThreads, 0, stream>>>(static_cast<const T*>(x), P, HW, static_cast<T*>(y));
    } else if (cl) {
      adaptive_fwd<T, true><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(x), xs, static_cast<T*>(y), g, total);
    } else {
      adaptive_fwd<T, false><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(x), xs, static_cast<T*>(y), g, total);
    }
  });
}

void adaptive_avg_backward(Scalar s, const Geometry& g, const void* gy, Strides4 gys, void* gx, bool cl,
                           cudaStream_t stream) {
  const int64_t total = g.N * g.C * g.H * g.W;
  if (total == 0) return;
  by_type(s, [&](auto tag) {
    using T = decltype(tag);
    if (cl) adaptive_bwd<T, true><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(gy), gys, static_cast<T*>(gx), g, total);
    else adaptive_bwd<T, false><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(gy), gys, static_cast<T*>(gx), g, total);
  });
}

}  // namespace qflow::cuda::pool
