// Batch norm on the GPU: statistics, normalisation (+ ReLU), and the backward.
// See Note [Batch norm on the GPU] in norm.cuh.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "kernels/launch_config.cuh"
#include "kernels/norm.cuh"

namespace qflow::cuda::bn {
namespace {

constexpr int kThreads = 256;

template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};


int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

// How the reduction kernels split the rows / the per-channel elements (a function of the
// layout and the GPU only, so a rerun on the same GPU reduces in the same order).
int64_t plan_splits(const Layout& l) {
  const int64_t target = 4 * static_cast<int64_t>(num_sms());
  if (l.rows) {
    const int64_t col_blocks = ceil_div(l.C, 128);
    return clamp64(ceil_div(target, col_blocks), 1, std::min<int64_t>(65535, std::max<int64_t>(1, l.R / 64)));
  }
  return clamp64(ceil_div(target, l.C), 1, std::min<int64_t>(65535, std::max<int64_t>(1, l.N * l.S / (kThreads * 8))));
}

size_t align_up(size_t v) { return (v + 255) & ~size_t(255); }

// Workspace regions: partials [splits][3][C] (T), mean/invstd [2][C] (double), coefficients
// [4][C] (T).
struct Workspace {
  void* part;
  double* mean_d;
  double* invstd_d;
  void* coef;
};
Workspace carve(void* base, const Layout& l, int64_t splits, size_t elem) {
  char* p = static_cast<char*>(base);
  Workspace w;
  w.part = p;
  p += align_up(static_cast<size_t>(splits * 3 * l.C) * elem);
  w.mean_d = reinterpret_cast<double*>(p);
  w.invstd_d = w.mean_d + l.C;
  p += align_up(static_cast<size_t>(2 * l.C) * sizeof(double));
  w.coef = p;
  return w;
}

// ---- device helpers ------------------------------------------------------------------------------

// Chan's merge of (nb, mb, m2b) into (n, mean, m2); n == 0 takes b as it is.
template <typename A>
__device__ __forceinline__ void wf_merge(A& n, A& mean, A& m2, A nb, A mb, A m2b) {
  if (nb == A(0)) return;
  const A tot = n + nb;
  const A d = mb - mean;
  const A f = nb / tot;
  mean += d * f;
  m2 += m2b + d * d * n * f;
  n = tot;
}

template <typename T>
__device__ __forceinline__ double chan_at(const ChannelTensor& t, int64_t c, double absent) {
  return t.data ? static_cast<double>(static_cast<const T*>(t.data)[c * t.stride]) : absent;
}

// Block-wide merge of one (n, mean, m2) per thread of a 1-D block, fixed order; the result
// is valid in thread 0.
template <typename A>
__device__ void block_welford(A& n, A& mean, A& m2) {
  __shared__ A sh[3][kThreads / 32];
  for (int off = 16; off > 0; off >>= 1) {
    const A nb = __shfl_down_sync(0xffffffffu, n, off);
    const A mb = __shfl_down_sync(0xffffffffu, mean, off);
    const A m2b = __shfl_down_sync(0xffffffffu, m2, off);
    wf_merge(n, mean, m2, nb, mb, m2b);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    sh[0][warp] = n;
    sh[1][warp] = mean;
    sh[2][warp] = m2;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) wf_merge(n, mean, m2, sh[0][w], sh[1][w], sh[2][w]);
  }
}

// Block-wide sums of two values per thread of a 1-D block, fixed order; valid in thread 0.
template <typename A>
__device__ void block_sum2(A& a, A& b) {
  __shared__ A sh[2][kThreads / 32];
  for (int off = 16; off > 0; off >>= 1) {
    a += __shfl_down_sync(0xffffffffu, a, off);
    b += __shfl_down_sync(0xffffffffu, b, off);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    sh[0][warp] = a;
    sh[1][warp] = b;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) {
      a += sh[0][w];
      b += sh[1][w];
    }
  }
}

// ---- rows layout [R, C] ---------------------------------------------------------------------------
// Block (bx, by): threadIdx.x walks vector columns (V channels each), threadIdx.y rows;
// blockIdx.y picks a run of rows_per_split rows.

template <typename T, int V>
__global__ void __launch_bounds__(kThreads) rows_stats(const T* __restrict__ x, int64_t R, int64_t C,
                                                       int64_t rows_per_split, T* __restrict__ part) {
  const int tx = threadIdx.x, ty = threadIdx.y, bx = blockDim.x, by = blockDim.y;
  const int64_t CV = C / V;
  const int64_t cv = static_cast<int64_t>(blockIdx.x) * bx + tx;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_split;
  const int64_t r1 = min(R, r0 + rows_per_split);
  T n = 0, mean[V], m2[V];
#pragma unroll
  for (int v = 0; v < V; ++v) mean[v] = m2[v] = T(0);
  if (cv < CV) {
    const Vec<T, V>* xv = reinterpret_cast<const Vec<T, V>*>(x);
    for (int64_t r = r0 + ty; r < r1; r += by) {
      const Vec<T, V> val = xv[r * CV + cv];
      n += T(1);
      const T inv = T(1) / n;
#pragma unroll
      for (int v = 0; v < V; ++v) {
        const T d = val.v[v] - mean[v];
        mean[v] += d * inv;
        m2[v] += d * (val.v[v] - mean[v]);
      }
    }
  }
  extern __shared__ unsigned char smem_raw[];
  T* s_n = reinterpret_cast<T*>(smem_raw);  // [by][bx]
  T* s_mean = s_n + by * bx;                // [by][bx][V]
  T* s_m2 = s_mean + by * bx * V;
  const int slot = ty * bx + tx;
  s_n[slot] = n;
#pragma unroll
  for (int v = 0; v < V; ++v) {
    s_mean[slot * V + v] = mean[v];
    s_m2[slot * V + v] = m2[v];
  }
  __syncthreads();
  for (int s = by / 2; s > 0; s >>= 1) {
    if (ty < s) {
      const int o = (ty + s) * bx + tx;
      const T nb = s_n[o];
#pragma unroll
      for (int v = 0; v < V; ++v) {
        T nn = n;  // each channel merges with the same counts
        wf_merge(nn, mean[v], m2[v], nb, s_mean[o * V + v], s_m2[o * V + v]);
      }
      n += nb;
      s_n[slot] = n;
#pragma unroll
      for (int v = 0; v < V; ++v) {
        s_mean[slot * V + v] = mean[v];
        s_m2[slot * V + v] = m2[v];
      }
    }
    __syncthreads();
  }
  if (ty == 0 && cv < CV) {
    const int64_t split = blockIdx.y;
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const int64_t c = cv * V + v;
      part[(split * 3 + 0) * C + c] = n;
      part[(split * 3 + 1) * C + c] = mean[v];
      part[(split * 3 + 2) * C + c] = m2[v];
    }
  }
}

template <typename T, int V, bool Relu>
__global__ void __launch_bounds__(kThreads) rows_forward(const T* __restrict__ x, T* __restrict__ y, int64_t R,
                                                         int64_t C, int64_t rows_per_split,
                                                         const T* __restrict__ scale, const T* __restrict__ shift) {
  const int64_t CV = C / V;
  const int64_t cv = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (cv >= CV) return;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_split;
  const int64_t r1 = min(R, r0 + rows_per_split);
  T sc[V], sh[V];
#pragma unroll
  for (int v = 0; v < V; ++v) {
    sc[v] = scale[cv * V + v];
    sh[v] = shift[cv * V + v];
  }
  const Vec<T, V>* xv = reinterpret_cast<const Vec<T, V>*>(x);
  Vec<T, V>* yv = reinterpret_cast<Vec<T, V>*>(y);
  for (int64_t r = r0 + threadIdx.y; r < r1; r += blockDim.y) {
    const Vec<T, V> a = xv[r * CV + cv];
    Vec<T, V> o;
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const T t = a.v[v] * sc[v] + sh[v];
      o.v[v] = Relu ? (t < T(0) ? T(0) : t) : t;
    }
    yv[r * CV + cv] = o;
  }
}

template <typename T, int V, bool Masked>
__global__ void __launch_bounds__(kThreads) rows_bwd_sums(const T* __restrict__ x, const T* __restrict__ dy,
                                                          const T* __restrict__ relu_out, const T* __restrict__ mu,
                                                          int64_t R, int64_t C, int64_t rows_per_split,
                                                          T* __restrict__ part) {
  const int tx = threadIdx.x, ty = threadIdx.y, bx = blockDim.x, by = blockDim.y;
  const int64_t CV = C / V;
  const int64_t cv = static_cast<int64_t>(blockIdx.x) * bx + tx;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_split;
  const int64_t r1 = min(R, r0 + rows_per_split);
  T sg[V], sgx[V], m[V];
#pragma unroll
  for (int v = 0; v < V; ++v) sg[v] = sgx[v] = m[v] = T(0);
  if (cv < CV) {
#pragma unroll
    for (int v = 0; v < V; ++v) m[v] = mu[cv * V + v];
    const Vec<T, V>* xv = reinterpret_cast<const Vec<T, V>*>(x);
    const Vec<T, V>* gv = reinterpret_cast<const Vec<T, V>*>(dy);
    const Vec<T, V>* ov = reinterpret_cast<const Vec<T, V>*>(relu_out);
    for (int64_t r = r0 + ty; r < r1; r += by) {
      const Vec<T, V> a = xv[r * CV + cv];
      Vec<T, V> g = gv[r * CV + cv];
      if constexpr (Masked) {
        const Vec<T, V> o = ov[r * CV + cv];
#pragma unroll
        for (int v = 0; v < V; ++v) g.v[v] = o.v[v] > T(0) ? g.v[v] : T(0);
      }
#pragma unroll
      for (int v = 0; v < V; ++v) {
        sg[v] += g.v[v];
        sgx[v] += g.v[v] * (a.v[v] - m[v]);
      }
    }
  }
  extern __shared__ unsigned char smem_raw[];
  T* s_g = reinterpret_cast<T*>(smem_raw);  // [by][bx][V]
  T* s_gx = s_g + by * bx * V;
  const int slot = ty * bx + tx;
#pragma unroll
  for (int v = 0; v < V; ++v) {
    s_g[slot * V + v] = sg[v];
    s_gx[slot * V + v] = sgx[v];
  }
  __syncthreads();
  for (int s = by / 2; s > 0; s >>= 1) {
    if (ty < s) {
      const int o = (ty + s) * bx + tx;
#pragma unroll
      for (int v = 0; v < V; ++v) {
        sg[v] += s_g[o * V + v];
        sgx[v] += s_gx[o * V + v];
        s_g[slot * V + v] = sg[v];
        s_gx[slot * V + v] = sgx[v];
      }
    }
    __syncthreads();
  }
  if (ty == 0 && cv < CV) {
    const int64_t split = blockIdx.y;
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const int64_t c = cv * V + v;
      part[(split * 2 + 0) * C + c] = sg[v];
      part[(split * 2 + 1) * C + c] = sgx[v];
    }
  }
}

// dx = k1 * g + k2 * (x - mu) + k3, g the (masked) incoming gradient.
template <typename T, int V, bool HasDy, bool Masked>
__global__ void __launch_bounds__(kThreads) rows_bwd_apply(const T* __restrict__ x, const T* __restrict__ dy,
                                                           const T* __restrict__ relu_out, T* __restrict__ dx, int64_t R,
                                                           int64_t C, int64_t rows_per_split, const T* __restrict__ coef) {
  const int64_t CV = C / V;
  const int64_t cv = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (cv >= CV) return;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_split;
  const int64_t r1 = min(R, r0 + rows_per_split);
  T k1[V], k2[V], k3[V], m[V];
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const int64_t c = cv * V + v;
    k1[v] = coef[c];
    k2[v] = coef[C + c];
    k3[v] = coef[2 * C + c];
    m[v] = coef[3 * C + c];
  }
  const Vec<T, V>* xv = reinterpret_cast<const Vec<T, V>*>(x);
  const Vec<T, V>* gv = reinterpret_cast<const Vec<T, V>*>(dy);
  const Vec<T, V>* ov = reinterpret_cast<const Vec<T, V>*>(relu_out);
  Vec<T, V>* dv = reinterpret_cast<Vec<T, V>*>(dx);
  for (int64_t r = r0 + threadIdx.y; r < r1; r += blockDim.y) {
    const Vec<T, V> a = xv[r * CV + cv];
    Vec<T, V> o;
    if constexpr (HasDy) {
      Vec<T, V> g = gv[r * CV + cv];
      if constexpr (Masked) {
        const Vec<T, V> ro = ov[r * CV + cv];
#pragma unroll
        for (int v = 0; v < V; ++v) g.v[v] = ro.v[v] > T(0) ? g.v[v] : T(0);
      }
#pragma unroll
      for (int v = 0; v < V; ++v) o.v[v] = k1[v] * g.v[v] + k2[v] * (a.v[v] - m[v]) + k3[v];
    } else {
#pragma unroll
      for (int v = 0; v < V; ++v) o.v[v] = k2[v] * (a.v[v] - m[v]) + k3[v];
    }
    dv[r * CV + cv] = o;
  }
}

// ---- planes layout (N, C, S) ----------------------------------------------------------------------
// Reductions: grid (C, splits), a block reduces a run of chunk_v vectors of channel
// blockIdx.x's N * S elements. Element-wise kernels: grid-stride over the vectors.

template <typename T, int V>
__global__ void __launch_bounds__(kThreads) planes_stats(const T* __restrict__ x, int64_t N, int64_t C, int64_t S,
                                                         int64_t chunk_v, T* __restrict__ part) {
  const int64_t c = blockIdx.x, split = blockIdx.y;
  const int64_t SV = S / V, total = N * SV;
  const int64_t j0 = split * chunk_v, j1 = min(total, j0 + chunk_v);
  const Vec<T, V>* xv = reinterpret_cast<const Vec<T, V>*>(x);
  T n = 0, mean = 0, m2 = 0;
  for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
    const int64_t p = j / SV, s = j - p * SV;
    const Vec<T, V> val = xv[(p * C + c) * SV + s];
#pragma unroll
    for (int v = 0; v < V; ++v) {
      n += T(1);
      const T d = val.v[v] - mean;
      mean += d / n;
      m2 += d * (val.v[v] - mean);
    }
  }
  block_welford(n, mean, m2);
  if (threadIdx.x == 0) {
    part[(split * 3 + 0) * C + c] = n;
    part[(split * 3 + 1) * C + c] = mean;
    part[(split * 3 + 2) * C + c] = m2;
  }
}

template <typename T, int V, bool Relu>
__global__ void __launch_bounds__(kThreads) planes_forward(const T* __restrict__ x, T* __restrict__ y, int64_t C,
                                                           int64_t S, int64_t total_v, const T* __restrict__ scale,
                                                           const T* __restrict__ shift) {
  const Vec<T, V>* xv = reinterpret_cast<const Vec<T, V>*>(x);
  Vec<T, V>* yv = reinterpret_cast<Vec<T, V>*>(y);
  const int64_t SV = S / V;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total_v;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = (i / SV) % C;
    const T sc = scale[c], sh = shift[c];
    const Vec<T, V> a = xv[i];
    Vec<T, V> o;
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const T t = a.v[v] * sc + sh;
      o.v[v] = Relu ? (t < T(0) ? T(0) : t) : t;
    }
    yv[i] = o;
  }
}

template <typename T, int V, bool Masked>
__global__ void __launch_bounds__(kThreads) planes_bwd_sums(const T* __restrict__ x, const T* __restrict__ dy,
                                                            const T* __restrict__ relu_out, const T* __restrict__ mu,
                                                            int64_t N, int64_t C, int64_t S, int64_t chunk_v,
                                                            T* __restrict__ part) {
  const int64_t c = blockIdx.x, split = blockIdx.y;
  const int64_t SV = S / V, total = N * SV;
  const int64_t j0 = split * chunk_v, j1 = min(total, j0 + chunk_v);
  const Vec<T, V>* xv = reinterpret_cast<const Vec<T, V>*>(x);
  const Vec<T, V>* gv = reinterpret_cast<const Vec<T, V>*>(dy);
  const Vec<T, V>* ov = reinterpret_cast<const Vec<T, V>*>(relu_out);
  const T m = mu[c];
  T sg = 0, sgx = 0;
  for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
    const int64_t p = j / SV, s = j - p * SV;
    const int64_t k = (p * C + c) * SV + s;
    const Vec<T, V> a = xv[k];
    Vec<T, V> g = gv[k];
    if constexpr (Masked) {
      const Vec<T, V> o = ov[k];
#pragma unroll
      for (int v = 0; v < V; ++v) g.v[v] = o.v[v] > T(0) ? g.v[v] : T(0);
    }
#pragma unroll
    for (int v = 0; v < V; ++v) {
      sg += g.v[v];
      sgx += g.v[v] * (a.v[v] - m);
    }
  }
  block_sum2(sg, sgx);
  if (threadIdx.x == 0) {
    part[(split * 2 + 0) * C + c] = sg;
    part[(split * 2 + 1) * C + c] = sgx;
  }
}

template <typename T, int V, bool HasDy, bool Masked>
__global__ void __launch_bounds__(kThreads) planes_bwd_apply(const T* __restrict__ x, const T* __restrict__ dy,
                                                             const T* __restrict__ relu_out, T* __restrict__ dx,
                                                             int64_t C, int64_t S, int64_t total_v,
                                                             const T* __restrict__ coef) {
  const Vec<T, V>* xv = reinterpret_cast<const Vec<T, V>*>(x);
  const Vec<T, V>* gv = reinterpret_cast<const Vec<T, V>*>(dy);
  const Vec<T, V>* ov = reinterpret_cast<const Vec<T, V>*>(relu_out);
  Vec<T, V>* dv = reinterpret_cast<Vec<T, V>*>(dx);
  const int64_t SV = S / V;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total_v;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = (i / SV) % C;
    const T k1 = coef[c], k2 = coef[C + c], k3 = coef[2 * C + c], m = coef[3 * C + c];
    const Vec<T, V> a = xv[i];
    Vec<T, V> o;
    if constexpr (HasDy) {
      Vec<T, V> g = gv[i];
      if constexpr (Masked) {
        const Vec<T, V> ro = ov[i];
#pragma unroll
        for (int v = 0; v < V; ++v) g.v[v] = ro.v[v] > T(0) ? g.v[v] : T(0);
      }
#pragma unroll
      for (int v = 0; v < V; ++v) o.v[v] = k1 * g.v[v] + k2 * (a.v[v] - m) + k3;
    } else {
#pragma unroll
      for (int v = 0; v < V; ++v) o.v[v] = k2 * (a.v[v] - m) + k3;
    }
    dv[i] = o;
  }
}

// ---- per-channel finalisation (one thread per channel) --------------------------------------------

// Merges the partials in a fixed order (double), then as the CPU kernel: invstd from the biased
// variance, the running statistics from the unbiased one. Eval: the running statistics.
// Writes the saved statistics (when asked), mean/invstd in double, and coef = [scale, shift]
// (forward) or coef[3C..4C) = mean rounded to T (backward's recomputation).
//
// One warp per channel (launched with warp_channel_blocks): lane l merges splits l, l + 32, ...,
// then the lanes merge in a fixed shuffle order. One thread per channel walking hundreds of
// splits was a chain of dependent loads and double divisions: ~300 us a call on an H100, 12 ms
// of a 23 ms ResNet18 training step at batch 512 (ncu, tools/gpu-check --profile).
template <typename T>
__global__ void finalize_stats(const T* __restrict__ part, int64_t splits, int64_t C, int64_t count, bool training,
                               ChannelTensor w, ChannelTensor b, ChannelTensor rm, ChannelTensor rv, double momentum,
                               double eps, T* save_mean, T* save_invstd, double* mean_d, double* invstd_d,
                               T* scale_shift, T* mu_t) {
  const int lane = threadIdx.x % 32;
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (c >= C) return;  // the whole warp: c is the warp's
  double mean, invstd;
  if (training) {
    double n = 0, mu = 0, m2 = 0;
    for (int64_t s = lane; s < splits; s += 32)
      wf_merge<double>(n, mu, m2, static_cast<double>(part[(s * 3 + 0) * C + c]),
                       static_cast<double>(part[(s * 3 + 1) * C + c]), static_cast<double>(part[(s * 3 + 2) * C + c]));
    for (int off = 16; off > 0; off >>= 1) {
      const double nb = __shfl_down_sync(0xffffffffu, n, off);
      const double mb = __shfl_down_sync(0xffffffffu, mu, off);
      const double m2b = __shfl_down_sync(0xffffffffu, m2, off);
      wf_merge<double>(n, mu, m2, nb, mb, m2b);
    }
    if (lane != 0) return;
    const double m = static_cast<double>(count);
    if (m2 < 0) m2 = 0;
    mean = mu;
    invstd = 1.0 / sqrt(m2 / m + eps);
    if (rm.data) {
      T* pm = static_cast<T*>(rm.data) + c * rm.stride;
      T* pv = static_cast<T*>(rv.data) + c * rv.stride;
      *pm = static_cast<T>((1.0 - momentum) * static_cast<double>(*pm) + momentum * mean);
      *pv = static_cast<T>((1.0 - momentum) * static_cast<double>(*pv) + momentum * (m2 / (m - 1.0)));
    }
  } else {
    if (lane != 0) return;
    mean = chan_at<T>(rm, c, 0.0);
    invstd = 1.0 / sqrt(chan_at<T>(rv, c, 1.0) + eps);
  }
  if (save_mean) save_mean[c] = static_cast<T>(mean);
  if (save_invstd) save_invstd[c] = static_cast<T>(invstd);
  if (mean_d) {
    mean_d[c] = mean;
    invstd_d[c] = invstd;
  }
  if (scale_shift) {
    const double sc = invstd * chan_at<T>(w, c, 1.0);
    scale_shift[c] = static_cast<T>(sc);
    scale_shift[C + c] = static_cast<T>(chan_at<T>(b, c, 0.0) - mean * sc);
  }
  if (mu_t) mu_t[c] = static_cast<T>(mean);
}

// The backward's statistics when they are given: the saved ones (train) or the running ones.
template <typename T>
__global__ void load_stats(int64_t C, bool train, ChannelTensor sm, ChannelTensor si, ChannelTensor rm,
                           ChannelTensor rv, double eps, double* mean_d, double* invstd_d, T* mu_t) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const double mean = train ? chan_at<T>(sm, c, 0.0) : chan_at<T>(rm, c, 0.0);
  const double invstd = train ? chan_at<T>(si, c, 1.0) : 1.0 / sqrt(chan_at<T>(rv, c, 1.0) + eps);
  mean_d[c] = mean;
  invstd_d[c] = invstd;
  mu_t[c] = static_cast<T>(mean);
}

// As the CPU: dx = k1 dy + k2 (x - mean) + k3 with
//   k1 = w invstd, k2 = -(w sum(dy xmu) + grad_invstd) invstd^3 / M, k3 = (-w invstd sum(dy) + grad_mean) / M
// (train; eval: k2 = k3 = 0); dweight = sum(dy xmu) invstd, dbias = sum(dy).
template <typename T>
__global__ void finalize_backward(const T* __restrict__ part, int64_t splits, int64_t C, int64_t count, bool has_dy,
                                  bool train, const double* mean_d, const double* invstd_d, ChannelTensor w,
                                  ChannelTensor gmean, ChannelTensor ginv, T* gw, T* gb, T* coef) {
  // One warp per channel, as finalize_stats.
  const int lane = threadIdx.x % 32;
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (c >= C) return;
  (void)mean_d;
  double sdy = 0, sdx = 0;
  if (has_dy) {
    for (int64_t s = lane; s < splits; s += 32) {
      sdy += static_cast<double>(part[(s * 2 + 0) * C + c]);
      sdx += static_cast<double>(part[(s * 2 + 1) * C + c]);
    }
    for (int off = 16; off > 0; off >>= 1) {
      sdy += __shfl_down_sync(0xffffffffu, sdy, off);
      sdx += __shfl_down_sync(0xffffffffu, sdx, off);
    }
  }
  if (lane != 0) return;
  const double m = static_cast<double>(count);
  const double wc = chan_at<T>(w, c, 1.0), is = invstd_d[c], is3 = is * is * is;
  gw[c] = static_cast<T>(sdx * is);
  gb[c] = static_cast<T>(sdy);
  coef[c] = static_cast<T>(has_dy ? wc * is : 0.0);
  coef[C + c] = static_cast<T>(train ? -(wc * sdx + chan_at<T>(ginv, c, 0.0)) * is3 / m : 0.0);
  coef[2 * C + c] = static_cast<T>(train ? (-wc * is * sdy + chan_at<T>(gmean, c, 0.0)) / m : 0.0);
}

// ---- host side ------------------------------------------------------------------------------------

bool aligned16(const void* p) { return p == nullptr || (reinterpret_cast<uintptr_t>(p) % 16) == 0; }

struct RowsGrid {
  dim3 grid, block;
  int64_t rows_per_split = 0, splits = 0;
  size_t smem_stats = 0, smem_sums = 0;
};

template <typename T, int V>
RowsGrid rows_grid(const Layout& l) {
  RowsGrid g;
  const int64_t CV = l.C / V;
  int bx = 1;
  while (bx < CV && bx < 32) bx <<= 1;
  const int by = kThreads / bx;
  g.block = dim3(bx, by);
  const int64_t splits = plan_splits(l);
  g.rows_per_split = ceil_div(l.R, splits);
  g.splits = ceil_div(l.R, g.rows_per_split);
  g.grid = dim3(static_cast<unsigned>(ceil_div(CV, bx)), static_cast<unsigned>(g.splits));
  g.smem_stats = static_cast<size_t>(bx * by) * (1 + 2 * V) * sizeof(T);
  g.smem_sums = static_cast<size_t>(bx * by) * 2 * V * sizeof(T);
  return g;
}

struct PlanesGrid {
  int64_t chunk_v = 0, splits = 0, total_v = 0;
  unsigned elem_blocks = 0;
};

template <int V>
PlanesGrid planes_grid(const Layout& l) {
  PlanesGrid g;
  const int64_t per_channel_v = l.N * (l.S / V);
  const int64_t splits = plan_splits(l);
  g.chunk_v = std::max<int64_t>(1, ceil_div(per_channel_v, splits));
  g.splits = std::max<int64_t>(1, ceil_div(per_channel_v, g.chunk_v));
  g.total_v = l.N * l.C * (l.S / V);
  g.elem_blocks = static_cast<unsigned>(clamp64(ceil_div(g.total_v, kThreads), 1, 32 * static_cast<int64_t>(num_sms())));
  return g;
}

unsigned channel_blocks(int64_t C) { return static_cast<unsigned>(ceil_div(C, 128)); }

// finalize_stats and finalize_backward: one warp per channel, 8 warps a block.
constexpr int kFinalizeThreads = 256;
unsigned warp_channel_blocks(int64_t C) { return static_cast<unsigned>(ceil_div(C * 32, kFinalizeThreads)); }

// Statistics of x into the workspace (training): partial reductions, then finalize_stats.
template <typename T, int V>
int64_t launch_stats(const Layout& l, const T* x, T* part, cudaStream_t stream) {
  if (l.rows) {
    const RowsGrid g = rows_grid<T, V>(l);
    rows_stats<T, V><<<g.grid, g.block, g.smem_stats, stream>>>(x, l.R, l.C, g.rows_per_split, part);
    return g.splits;
  }
  const PlanesGrid g = planes_grid<V>(l);
  planes_stats<T, V><<<dim3(static_cast<unsigned>(l.C), static_cast<unsigned>(g.splits)), kThreads, 0, stream>>>(
      x, l.N, l.C, l.S, g.chunk_v, part);
  return g.splits;
}

template <typename T, int V>
void forward_impl(const ForwardArgs& a, cudaStream_t stream) {
  const Layout& l = a.layout;
  const Workspace ws = carve(a.workspace, l, plan_splits(l), sizeof(T));
  T* part = static_cast<T*>(ws.part);
  T* coef = static_cast<T*>(ws.coef);
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  int64_t splits = 0;
  if (a.training) splits = launch_stats<T, V>(l, x, part, stream);
  finalize_stats<T><<<warp_channel_blocks(l.C), kFinalizeThreads, 0, stream>>>(
      part, splits, l.C, l.R, a.training, a.weight, a.bias, a.running_mean, a.running_var, a.momentum, a.eps,
      static_cast<T*>(a.save_mean), static_cast<T*>(a.save_invstd), nullptr, nullptr, coef, nullptr);
  if (l.rows) {
    const RowsGrid g = rows_grid<T, V>(l);
    if (a.relu) rows_forward<T, V, true><<<g.grid, g.block, 0, stream>>>(x, y, l.R, l.C, g.rows_per_split, coef, coef + l.C);
    else rows_forward<T, V, false><<<g.grid, g.block, 0, stream>>>(x, y, l.R, l.C, g.rows_per_split, coef, coef + l.C);
  } else {
    const PlanesGrid g = planes_grid<V>(l);
    if (a.relu) planes_forward<T, V, true><<<g.elem_blocks, kThreads, 0, stream>>>(x, y, l.C, l.S, g.total_v, coef, coef + l.C);
    else planes_forward<T, V, false><<<g.elem_blocks, kThreads, 0, stream>>>(x, y, l.C, l.S, g.total_v, coef, coef + l.C);
  }
}

template <typename T, int V, bool Masked>
void backward_apply(const BackwardArgs& a, const T* coef, cudaStream_t stream) {
  const Layout& l = a.layout;
  const T* x = static_cast<const T*>(a.x);
  const T* dy = static_cast<const T*>(a.dy);
  const T* ro = static_cast<const T*>(a.relu_out);
  T* dx = static_cast<T*>(a.dx);
  if (l.rows) {
    const RowsGrid g = rows_grid<T, V>(l);
    if (dy) rows_bwd_apply<T, V, true, Masked><<<g.grid, g.block, 0, stream>>>(x, dy, ro, dx, l.R, l.C, g.rows_per_split, coef);
    else rows_bwd_apply<T, V, false, false><<<g.grid, g.block, 0, stream>>>(x, dy, ro, dx, l.R, l.C, g.rows_per_split, coef);
  } else {
    const PlanesGrid g = planes_grid<V>(l);
    if (dy) planes_bwd_apply<T, V, true, Masked><<<g.elem_blocks, kThreads, 0, stream>>>(x, dy, ro, dx, l.C, l.S, g.total_v, coef);
    else planes_bwd_apply<T, V, false, false><<<g.elem_blocks, kThreads, 0, stream>>>(x, dy, ro, dx, l.C, l.S, g.total_v, coef);
  }
}

template <typename T, int V, bool Masked>
int64_t backward_sums(const BackwardArgs& a, const T* mu, T* part, cudaStream_t stream) {
  const Layout& l = a.layout;
  const T* x = static_cast<const T*>(a.x);
  const T* dy = static_cast<const T*>(a.dy);
  const T* ro = static_cast<const T*>(a.relu_out);
  if (l.rows) {
    const RowsGrid g = rows_grid<T, V>(l);
    rows_bwd_sums<T, V, Masked><<<g.grid, g.block, g.smem_sums, stream>>>(x, dy, ro, mu, l.R, l.C, g.rows_per_split, part);
    return g.splits;
  }
  const PlanesGrid g = planes_grid<V>(l);
  planes_bwd_sums<T, V, Masked><<<dim3(static_cast<unsigned>(l.C), static_cast<unsigned>(g.splits)), kThreads, 0, stream>>>(
      x, dy, ro, mu, l.N, l.C, l.S, g.chunk_v, part);
  return g.splits;
}

template <typename T, int V>
void backward_impl(const BackwardArgs& a, cudaStream_t stream) {
  const Layout& l = a.layout;
  const Workspace ws = carve(a.workspace, l, plan_splits(l), sizeof(T));
  T* part = static_cast<T*>(ws.part);
  T* coef = static_cast<T*>(ws.coef);  // [k1, k2, k3, mu] x C
  T* mu = coef + 3 * l.C;
  const T* x = static_cast<const T*>(a.x);
  if (a.train && !(a.save_mean.data && a.save_invstd.data)) {
    // Note [Batch norm saves no statistics] (core/kernels/nn/norm.cpp): recompute them.
    const int64_t splits = launch_stats<T, V>(l, x, part, stream);
    finalize_stats<T><<<warp_channel_blocks(l.C), kFinalizeThreads, 0, stream>>>(part, splits, l.C, l.R, true, ChannelTensor{},
                                                               ChannelTensor{}, ChannelTensor{}, ChannelTensor{}, 0.0,
                                                               a.eps, nullptr, nullptr, ws.mean_d, ws.invstd_d, nullptr, mu);
  } else {
    load_stats<T><<<channel_blocks(l.C), 128, 0, stream>>>(l.C, a.train, a.save_mean, a.save_invstd, a.running_mean,
                                                           a.running_var, a.eps, ws.mean_d, ws.invstd_d, mu);
  }
  int64_t splits = 0;
  const bool masked = a.relu_out != nullptr;
  if (a.dy) splits = masked ? backward_sums<T, V, true>(a, mu, part, stream) : backward_sums<T, V, false>(a, mu, part, stream);
  finalize_backward<T><<<warp_channel_blocks(l.C), kFinalizeThreads, 0, stream>>>(part, splits, l.C, l.R, a.dy != nullptr, a.train,
                                                                ws.mean_d, ws.invstd_d, a.weight, a.grad_mean,
                                                                a.grad_invstd, static_cast<T*>(a.grad_weight),
                                                                static_cast<T*>(a.grad_bias), coef);
  if (masked) backward_apply<T, V, true>(a, coef, stream);
  else backward_apply<T, V, false>(a, coef, stream);
}

// The vector width: 16 bytes when the channel run (rows: C; planes: S) and every pointer allow it.
template <typename T>
bool can_vectorize(const Layout& l, std::initializer_list<const void*> ptrs) {
  constexpr int64_t V = 16 / sizeof(T);
  if ((l.rows ? l.C : l.S) % V != 0) return false;
  for (const void* p : ptrs)
    if (!aligned16(p)) return false;
  return true;
}

template <typename T>
void forward_typed(const ForwardArgs& a, cudaStream_t stream) {
  if (can_vectorize<T>(a.layout, {a.x, a.y})) forward_impl<T, 16 / sizeof(T)>(a, stream);
  else forward_impl<T, 1>(a, stream);
}

template <typename T>
void backward_typed(const BackwardArgs& a, cudaStream_t stream) {
  if (can_vectorize<T>(a.layout, {a.x, a.dy, a.relu_out, a.dx})) backward_impl<T, 16 / sizeof(T)>(a, stream);
  else backward_impl<T, 1>(a, stream);
}

}  // namespace

size_t workspace_bytes(const Layout& layout, Scalar scalar) {
  const size_t elem = scalar == Scalar::F32 ? sizeof(float) : sizeof(double);
  const int64_t splits = plan_splits(layout);
  return align_up(static_cast<size_t>(splits * 3 * layout.C) * elem) +
         align_up(static_cast<size_t>(2 * layout.C) * sizeof(double)) + align_up(static_cast<size_t>(4 * layout.C) * elem);
}

void forward(const ForwardArgs& a, cudaStream_t stream) {
  if (a.layout.C == 0) return;
  if (a.layout.R == 0) {  // an empty batch (eval only: training needs > 1 value per channel)
    if (a.training) return;
    const Workspace ws = carve(a.workspace, a.layout, plan_splits(a.layout), a.scalar == Scalar::F32 ? 4 : 8);
    if (a.scalar == Scalar::F32)
      finalize_stats<float><<<warp_channel_blocks(a.layout.C), kFinalizeThreads, 0, stream>>>(
          nullptr, 0, a.layout.C, 0, false, a.weight, a.bias, a.running_mean, a.running_var, a.momentum, a.eps,
          static_cast<float*>(a.save_mean), static_cast<float*>(a.save_invstd), nullptr, nullptr,
          static_cast<float*>(ws.coef), nullptr);
    else
      finalize_stats<double><<<warp_channel_blocks(a.layout.C), kFinalizeThreads, 0, stream>>>(
          nullptr, 0, a.layout.C, 0, false, a.weight, a.bias, a.running_mean, a.running_var, a.momentum, a.eps,
          static_cast<double*>(a.save_mean), static_cast<double*>(a.save_invstd), nullptr, nullptr,
          static_cast<double*>(ws.coef), nullptr);
    return;
  }
  if (a.scalar == Scalar::F32) forward_typed<float>(a, stream);
  else forward_typed<double>(a, stream);
}

void backward(const BackwardArgs& a, cudaStream_t stream) {
  if (a.layout.C == 0) return;
  if (a.layout.R == 0) {  // no elements: the parameter gradients are zero sums
    const size_t bytes = static_cast<size_t>(a.layout.C) * (a.scalar == Scalar::F32 ? 4 : 8);
    (void)cudaMemsetAsync(a.grad_weight, 0, bytes, stream);
    (void)cudaMemsetAsync(a.grad_bias, 0, bytes, stream);
    return;
  }
  if (a.scalar == Scalar::F32) backward_typed<float>(a, stream);
  else backward_typed<double>(a, stream);
}

}  // namespace qflow::cuda::bn
