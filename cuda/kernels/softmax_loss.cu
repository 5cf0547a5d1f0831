// softmax / log_softmax and the losses on the GPU. See Note [Softmax and losses on the GPU] in
// softmax_loss.cuh; the formulas are the CPU kernels' (core/kernels/reduction/softmax.cpp, loss.cpp).
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "kernels/launch_config.cuh"
#include "kernels/softmax_loss.cuh"

namespace qflow::cuda::sl {
namespace {

constexpr int kThreads = 256;
constexpr int kReduceThreads = 1024;
constexpr unsigned kFull = 0xffffffffu;


unsigned blocks_for(int64_t threads_wanted) { return grid_blocks(threads_wanted, kThreads); }

#define QFLOW_GRID_STRIDE(i, total)                                                                         \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (total);                \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <typename T>
__device__ __forceinline__ T neg_inf() {
  return -static_cast<T>(INFINITY);
}
template <typename T>
__device__ __forceinline__ T qnan() {
  return static_cast<T>(NAN);
}

// The CPU's row_max rule: m = v > m ? v : m (NaN never wins the max).
template <typename T>
__device__ __forceinline__ T max_rule(T m, T v) {
  return v > m ? v : m;
}

template <typename T>
__device__ __forceinline__ T warp_max(T v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = max_rule(v, __shfl_xor_sync(kFull, v, off));
  return v;
}
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFull, v, off);
  return v;
}

// Block-wide reductions for 1-D blocks of a multiple of 32 threads; the result reaches every
// thread. `sh` holds 32 values; the block synchronises before returning.
template <typename T>
__device__ T block_max(T v, T* sh) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  T r = lane < warps ? sh[lane] : neg_inf<T>();
  r = warp_max(r);
  return r;
}
template <typename T>
__device__ T block_sum(T v, T* sh) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  T r = lane < warps ? sh[lane] : T(0);
  r = warp_sum(r);
  return r;
}

// ---- softmax forward -----------------------------------------------------------------------------

// A warp per row of D <= 32 * K elements, kept in registers.
template <typename T, int K, bool Log>
__global__ void __launch_bounds__(kThreads) softmax_warp_fwd(const T* __restrict__ x, T* __restrict__ y, int64_t rows,
                                                             int D) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    const T* xr = x + row * D;
    T* yr = y + row * D;
    T v[K];
    T m = neg_inf<T>();
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = lane + k * 32;
      v[k] = c < D ? xr[c] : neg_inf<T>();
      m = max_rule(m, v[k]);
    }
    m = warp_max(m);
    T s = T(0);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (lane + k * 32 < D) {
        const T e = exp(v[k] - m);
        s += e;
        if constexpr (!Log) v[k] = e;
      }
    }
    s = warp_sum(s);
    if constexpr (Log) {
      const T ls = log(s);
#pragma unroll
      for (int k = 0; k < K; ++k)
        if (lane + k * 32 < D) yr[lane + k * 32] = (v[k] - m) - ls;
    } else {
      const T inv = T(1) / s;
#pragma unroll
      for (int k = 0; k < K; ++k)
        if (lane + k * 32 < D) yr[lane + k * 32] = v[k] * inv;
    }
  }
}

// A block per row (D > 1024): three passes through L2.
template <typename T, bool Log>
__global__ void __launch_bounds__(kThreads) softmax_block_fwd(const T* __restrict__ x, T* __restrict__ y, int64_t rows,
                                                              int64_t D) {
  __shared__ T sh[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * D;
    T* yr = y + row * D;
    T m = neg_inf<T>();
    for (int64_t c = threadIdx.x; c < D; c += blockDim.x) m = max_rule(m, xr[c]);
    m = block_max(m, sh);
    T s = T(0);
    for (int64_t c = threadIdx.x; c < D; c += blockDim.x) s += exp(xr[c] - m);
    s = block_sum(s, sh);
    if constexpr (Log) {
      const T ls = log(s);
      for (int64_t c = threadIdx.x; c < D; c += blockDim.x) yr[c] = (xr[c] - m) - ls;
    } else {
      const T inv = T(1) / s;
      for (int64_t c = threadIdx.x; c < D; c += blockDim.x) yr[c] = exp(xr[c] - m) * inv;
    }
  }
}

// inner > 1: a thread per (outer, inner) lane; consecutive threads read consecutive lanes.
template <typename T, bool Log>
__global__ void __launch_bounds__(kThreads) softmax_inner_fwd(const T* __restrict__ x, T* __restrict__ y,
                                                              int64_t outer, int64_t D, int64_t inner) {
  QFLOW_GRID_STRIDE(l, outer * inner) {
    const int64_t o = l / inner, i = l - o * inner;
    const T* xr = x + o * D * inner + i;
    T* yr = y + o * D * inner + i;
    T m = neg_inf<T>();
    for (int64_t d = 0; d < D; ++d) m = max_rule(m, xr[d * inner]);
    T s = T(0);
    for (int64_t d = 0; d < D; ++d) s += exp(xr[d * inner] - m);
    if constexpr (Log) {
      const T ls = log(s);
      for (int64_t d = 0; d < D; ++d) yr[d * inner] = (xr[d * inner] - m) - ls;
    } else {
      const T inv = T(1) / s;
      for (int64_t d = 0; d < D; ++d) yr[d * inner] = exp(xr[d * inner] - m) * inv;
    }
  }
}

// ---- softmax backward ----------------------------------------------------------------------------

template <typename T, int K, bool Log>
__global__ void __launch_bounds__(kThreads) softmax_warp_bwd(const T* __restrict__ dy, const T* __restrict__ y,
                                                             T* __restrict__ dx, int64_t rows, int D) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    T g[K], yv[K];
    T acc = T(0);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = lane + k * 32;
      g[k] = c < D ? dy[row * D + c] : T(0);
      yv[k] = c < D ? y[row * D + c] : T(0);
      acc += Log ? g[k] : g[k] * yv[k];
    }
    acc = warp_sum(acc);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = lane + k * 32;
      if (c < D) dx[row * D + c] = Log ? g[k] - exp(yv[k]) * acc : yv[k] * (g[k] - acc);
    }
  }
}

template <typename T, bool Log>
__global__ void __launch_bounds__(kThreads) softmax_block_bwd(const T* __restrict__ dy, const T* __restrict__ y,
                                                              T* __restrict__ dx, int64_t rows, int64_t D) {
  __shared__ T sh[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* gr = dy + row * D;
    const T* yr = y + row * D;
    T acc = T(0);
    for (int64_t c = threadIdx.x; c < D; c += blockDim.x) acc += Log ? gr[c] : gr[c] * yr[c];
    acc = block_sum(acc, sh);
    for (int64_t c = threadIdx.x; c < D; c += blockDim.x)
      dx[row * D + c] = Log ? gr[c] - exp(yr[c]) * acc : yr[c] * (gr[c] - acc);
  }
}

template <typename T, bool Log>
__global__ void __launch_bounds__(kThreads) softmax_inner_bwd(const T* __restrict__ dy, const T* __restrict__ y,
                                                              T* __restrict__ dx, int64_t outer, int64_t D,
                                                              int64_t inner) {
  QFLOW_GRID_STRIDE(l, outer * inner) {
    const int64_t o = l / inner, i = l - o * inner;
    const int64_t base = o * D * inner + i;
    T acc = T(0);
    for (int64_t d = 0; d < D; ++d) {
      const int64_t k = base + d * inner;
      acc += Log ? dy[k] : dy[k] * y[k];
    }
    for (int64_t d = 0; d < D; ++d) {
      const int64_t k = base + d * inner;
      dx[k] = Log ? dy[k] - exp(y[k]) * acc : y[k] * (dy[k] - acc);
    }
  }
}

template <typename T, bool Log>
void softmax_fwd_typed(const T* x, T* y, int64_t outer, int64_t D, int64_t inner, cudaStream_t stream) {
  if (inner == 1) {
    const int64_t rows = outer;
    const unsigned warp_blocks = blocks_for(rows * 32);
    const int d = static_cast<int>(D);
    if (D <= 32) softmax_warp_fwd<T, 1, Log><<<warp_blocks, kThreads, 0, stream>>>(x, y, rows, d);
    else if (D <= 64) softmax_warp_fwd<T, 2, Log><<<warp_blocks, kThreads, 0, stream>>>(x, y, rows, d);
    else if (D <= 128) softmax_warp_fwd<T, 4, Log><<<warp_blocks, kThreads, 0, stream>>>(x, y, rows, d);
    else if (D <= 256) softmax_warp_fwd<T, 8, Log><<<warp_blocks, kThreads, 0, stream>>>(x, y, rows, d);
    else if (D <= 512) softmax_warp_fwd<T, 16, Log><<<warp_blocks, kThreads, 0, stream>>>(x, y, rows, d);
    else if (D <= 1024) softmax_warp_fwd<T, 32, Log><<<warp_blocks, kThreads, 0, stream>>>(x, y, rows, d);
    else softmax_block_fwd<T, Log><<<blocks_for(rows * kThreads), kThreads, 0, stream>>>(x, y, rows, D);
    return;
  }
  softmax_inner_fwd<T, Log><<<blocks_for(outer * inner), kThreads, 0, stream>>>(x, y, outer, D, inner);
}

template <typename T, bool Log>
void softmax_bwd_typed(const T* dy, const T* y, T* dx, int64_t outer, int64_t D, int64_t inner, cudaStream_t stream) {
  if (inner == 1) {
    const int64_t rows = outer;
    const unsigned warp_blocks = blocks_for(rows * 32);
    const int d = static_cast<int>(D);
    if (D <= 32) softmax_warp_bwd<T, 1, Log><<<warp_blocks, kThreads, 0, stream>>>(dy, y, dx, rows, d);
    else if (D <= 64) softmax_warp_bwd<T, 2, Log><<<warp_blocks, kThreads, 0, stream>>>(dy, y, dx, rows, d);
    else if (D <= 128) softmax_warp_bwd<T, 4, Log><<<warp_blocks, kThreads, 0, stream>>>(dy, y, dx, rows, d);
    else if (D <= 256) softmax_warp_bwd<T, 8, Log><<<warp_blocks, kThreads, 0, stream>>>(dy, y, dx, rows, d);
    else if (D <= 512) softmax_warp_bwd<T, 16, Log><<<warp_blocks, kThreads, 0, stream>>>(dy, y, dx, rows, d);
    else if (D <= 1024) softmax_warp_bwd<T, 32, Log><<<warp_blocks, kThreads, 0, stream>>>(dy, y, dx, rows, d);
    else softmax_block_bwd<T, Log><<<blocks_for(rows * kThreads), kThreads, 0, stream>>>(dy, y, dx, rows, D);
    return;
  }
  softmax_inner_bwd<T, Log><<<blocks_for(outer * inner), kThreads, 0, stream>>>(dy, y, dx, outer, D, inner);
}

// ---- class-index losses ----------------------------------------------------------------------------
// Per position i with target t, m = (t != ignore_index), w_t the class weight:
//   loss_i = -(1 - eps) m w_t lsm_t - (eps / C) m sum_c w_c lsm_c
// lsm = log_softmax(self) (cross_entropy) or self (nll_loss).

struct Target {
  bool ignored, bad;
  double wt;  // the target's weight; 0 when ignored or out of range
};

template <typename T>
__device__ __forceinline__ Target read_target(int64_t t, const T* w, int64_t C, int64_t ignore) {
  Target r;
  r.ignored = t == ignore;
  r.bad = !r.ignored && (t < 0 || t >= C);
  r.wt = (r.ignored || r.bad) ? 0.0 : (w ? static_cast<double>(w[t]) : 1.0);
  return r;
}

// Writes one position's loss: to out (reduction none) or to the workspace for the reduction.
template <typename T>
__device__ __forceinline__ void store_loss(int64_t p, double loss, double wt, int reduction, T* out, double* loss_ws,
                                           double* wt_ws) {
  if (reduction == 0) {
    out[p] = static_cast<T>(loss);
  } else {
    loss_ws[p] = loss;
    wt_ws[p] = wt;
  }
}

// S == 1 cross entropy: a warp per row, log-softmax and the loss fused.
template <typename T>
__global__ void __launch_bounds__(kThreads) ce_rows_fwd(const T* __restrict__ x, const int64_t* __restrict__ target,
                                                        const T* __restrict__ w, int64_t N, int64_t C, int64_t ignore,
                                                        double eps, int reduction, T* out, double* loss_ws,
                                                        double* wt_ws) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t n = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; n < N; n += warps) {
    const T* xr = x + n * C;
    const Target tg = read_target(target[n], w, C, ignore);
    T m = neg_inf<T>();
    for (int64_t c = lane; c < C; c += 32) m = max_rule(m, xr[c]);
    m = warp_max(m);
    T s = T(0);
    for (int64_t c = lane; c < C; c += 32) s += exp(xr[c] - m);
    s = warp_sum(s);
    const T ls = log(s);
    double smooth = 0.0;
    if (eps > 0.0) {
      for (int64_t c = lane; c < C; c += 32) smooth += (w ? static_cast<double>(w[c]) : 1.0) * static_cast<double>((xr[c] - m) - ls);
      smooth = warp_sum(smooth);
    }
    if (lane == 0) {
      double loss = 0.0;
      if (tg.bad) {
        loss = qnan<double>();
      } else if (!tg.ignored) {
        const T lsm_t = (xr[target[n]] - m) - ls;
        loss = -(1.0 - eps) * tg.wt * static_cast<double>(lsm_t);
        if (eps > 0.0) loss -= eps / static_cast<double>(C) * smooth;
      }
      store_loss(n, loss, tg.wt, reduction, out, loss_ws, wt_ws);
    }
  }
}

// Any S (and nll_loss): a thread per position (n, s), stepping over the classes by S.
template <typename T, bool CE>
__global__ void __launch_bounds__(kThreads) class_positions_fwd(const T* __restrict__ x,
                                                                const int64_t* __restrict__ target,
                                                                const T* __restrict__ w, int64_t N, int64_t C, int64_t S,
                                                                int64_t ignore, double eps, int reduction, T* out,
                                                                double* loss_ws, double* wt_ws) {
  QFLOW_GRID_STRIDE(p, N * S) {
    const int64_t n = p / S, s = p - n * S;
    const T* xr = x + n * C * S + s;
    const int64_t t = target[p];
    const Target tg = read_target(t, w, C, ignore);
    T m = T(0), ls = T(0);
    if constexpr (CE) {
      m = neg_inf<T>();
      for (int64_t c = 0; c < C; ++c) m = max_rule(m, xr[c * S]);
      T sum = T(0);
      for (int64_t c = 0; c < C; ++c) sum += exp(xr[c * S] - m);
      ls = log(sum);
    }
    double loss = 0.0;
    if (tg.bad) {
      loss = qnan<double>();
    } else if (!tg.ignored) {
      const T lsm_t = CE ? (xr[t * S] - m) - ls : xr[t * S];
      loss = -(1.0 - eps) * tg.wt * static_cast<double>(lsm_t);
      if (eps > 0.0) {
        double smooth = 0.0;
        for (int64_t c = 0; c < C; ++c) {
          const T lsm = CE ? (xr[c * S] - m) - ls : xr[c * S];
          smooth += (w ? static_cast<double>(w[c]) : 1.0) * static_cast<double>(lsm);
        }
        loss -= eps / static_cast<double>(C) * smooth;
      }
    }
    store_loss(p, loss, tg.wt, reduction, out, loss_ws, wt_ws);
  }
}

// One block: the sum of the losses (and of the weights for the mean) in a fixed order.
template <typename T>
__global__ void __launch_bounds__(kReduceThreads) reduce_losses(const double* __restrict__ loss,
                                                                const double* __restrict__ wt, int64_t P, int reduction,
                                                                T* out) {
  __shared__ double sa[kReduceThreads], sb[kReduceThreads];
  double a = 0.0, b = 0.0;
  for (int64_t i = threadIdx.x; i < P; i += blockDim.x) {
    a += loss[i];
    b += wt[i];
  }
  sa[threadIdx.x] = a;
  sb[threadIdx.x] = b;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) {
      sa[threadIdx.x] += sa[threadIdx.x + s];
      sb[threadIdx.x] += sb[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[0] = static_cast<T>(reduction == 2 ? sa[0] : sa[0] / sb[0]);
}

// One block: tot[0] = sum of the targets' weights (W, the mean's divisor), tot[1] = sum_c w_c.
template <typename T>
__global__ void __launch_bounds__(kReduceThreads) weight_totals(const int64_t* __restrict__ target,
                                                                const T* __restrict__ w, int64_t P, int64_t C,
                                                                int64_t ignore, double* tot) {
  __shared__ double sa[kReduceThreads], sb[kReduceThreads];
  double a = 0.0, b = 0.0;
  for (int64_t i = threadIdx.x; i < P; i += blockDim.x) a += read_target(target[i], w, C, ignore).wt;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) b += w ? static_cast<double>(w[c]) : 1.0;
  sa[threadIdx.x] = a;
  sb[threadIdx.x] = b;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) {
      sa[threadIdx.x] += sa[threadIdx.x + s];
      sb[threadIdx.x] += sb[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    tot[0] = sa[0];
    tot[1] = sb[0];
  }
}

// The CPU's position_coefs: m_i * (grad_i | grad | grad / W).
template <typename T>
__device__ __forceinline__ double coef_of(const T* grad, int reduction, int64_t p, const double* tot) {
  if (reduction == 0) return static_cast<double>(grad[p]);
  const double g = static_cast<double>(grad[0]);
  return reduction == 1 ? g * (1.0 / tot[0]) : g;
}

// S == 1 cross entropy backward, a warp per row:
//   dx_c = coef ((1 - eps) w_t (p_c - [c == t]) + (eps / C) (p_c sum_k w_k - w_c)), p = softmax(x).
template <typename T>
__global__ void __launch_bounds__(kThreads) ce_rows_bwd(const T* __restrict__ x, const int64_t* __restrict__ target,
                                                        const T* __restrict__ w, const T* __restrict__ grad,
                                                        const double* __restrict__ tot, int64_t N, int64_t C,
                                                        int64_t ignore, double eps, int reduction, T* __restrict__ dx) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  const double k = eps / static_cast<double>(C), w_sum = tot[1];
  for (int64_t n = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; n < N; n += warps) {
    const T* xr = x + n * C;
    T* dr = dx + n * C;
    const int64_t t = target[n];
    const Target tg = read_target(t, w, C, ignore);
    const double cf = tg.ignored ? 0.0 : coef_of(grad, reduction, n, tot);
    const double a = (1.0 - eps) * tg.wt + k * w_sum;
    T m = neg_inf<T>();
    for (int64_t c = lane; c < C; c += 32) m = max_rule(m, xr[c]);
    m = warp_max(m);
    T s = T(0);
    for (int64_t c = lane; c < C; c += 32) s += exp(xr[c] - m);
    s = warp_sum(s);
    const T inv = T(1) / s;
    for (int64_t c = lane; c < C; c += 32) {
      const T p = exp(xr[c] - m) * inv;
      const double wc = w ? static_cast<double>(w[c]) : 1.0;
      T v = static_cast<T>(cf * (static_cast<double>(p) * a - k * wc));
      if (c == t) v -= static_cast<T>(cf * (1.0 - eps) * tg.wt);
      dr[c] = tg.bad ? qnan<T>() : v;
    }
  }
}

// Any S (and nll_loss, whose gradient is -coef w_t at the target and 0 elsewhere): a thread per
// position stepping over the classes by S.
template <typename T, bool CE>
__global__ void __launch_bounds__(kThreads) class_positions_bwd(const T* __restrict__ x,
                                                                const int64_t* __restrict__ target,
                                                                const T* __restrict__ w, const T* __restrict__ grad,
                                                                const double* __restrict__ tot, int64_t N, int64_t C,
                                                                int64_t S, int64_t ignore, double eps, int reduction,
                                                                T* __restrict__ dx) {
  const double k = eps / static_cast<double>(C), w_sum = tot[1];
  QFLOW_GRID_STRIDE(p, N * S) {
    const int64_t n = p / S, s = p - n * S;
    const T* xr = x + n * C * S + s;
    T* dr = dx + n * C * S + s;
    const int64_t t = target[p];
    const Target tg = read_target(t, w, C, ignore);
    const double cf = tg.ignored ? 0.0 : coef_of(grad, reduction, p, tot);
    if constexpr (CE) {
      const double a = (1.0 - eps) * tg.wt + k * w_sum;
      T m = neg_inf<T>();
      for (int64_t c = 0; c < C; ++c) m = max_rule(m, xr[c * S]);
      T sum = T(0);
      for (int64_t c = 0; c < C; ++c) sum += exp(xr[c * S] - m);
      const T inv = T(1) / sum;
      for (int64_t c = 0; c < C; ++c) {
        const T pc = exp(xr[c * S] - m) * inv;
        const double wc = w ? static_cast<double>(w[c]) : 1.0;
        T v = static_cast<T>(cf * (static_cast<double>(pc) * a - k * wc));
        if (c == t) v -= static_cast<T>(cf * (1.0 - eps) * tg.wt);
        dr[c * S] = tg.bad ? qnan<T>() : v;
      }
    } else {
      for (int64_t c = 0; c < C; ++c) {
        T v = T(0);
        if (c == t) v -= static_cast<T>(cf * tg.wt);
        dr[c * S] = tg.bad ? qnan<T>() : v;
      }
    }
  }
}

// ---- mse / l1 ------------------------------------------------------------------------------------

template <typename T, bool L1>
__device__ __forceinline__ T pointwise_value(T d) {
  if constexpr (L1) return d < T(0) ? -d : d;
  else return d * d;
}

template <typename T, bool L1>
__device__ __forceinline__ T pointwise_slope(T d) {
  if constexpr (L1) return static_cast<T>((T(0) < d) - (d < T(0)));
  else return T(2) * d;
}

template <typename T, bool L1>
__global__ void __launch_bounds__(kThreads) pointwise_none(const T* __restrict__ x, const T* __restrict__ y,
                                                           T* __restrict__ out, int64_t n) {
  QFLOW_GRID_STRIDE(i, n) out[i] = pointwise_value<T, L1>(x[i] - y[i]);
}

// Fixed grid (a function of n only): each block writes one partial sum (double).
template <typename T, bool L1>
__global__ void __launch_bounds__(kThreads) pointwise_partials(const T* __restrict__ x, const T* __restrict__ y,
                                                               int64_t n, double* __restrict__ partial) {
  __shared__ double sh[kThreads];
  T acc = T(0);
  QFLOW_GRID_STRIDE(i, n) acc += pointwise_value<T, L1>(x[i] - y[i]);
  sh[threadIdx.x] = static_cast<double>(acc);
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = sh[0];
}

template <typename T>
__global__ void __launch_bounds__(kReduceThreads) pointwise_total(const double* __restrict__ partial, int blocks,
                                                                  int64_t n, int reduction, T* out) {
  __shared__ double sh[kReduceThreads];
  double a = 0.0;
  for (int i = threadIdx.x; i < blocks; i += blockDim.x) a += partial[i];
  sh[threadIdx.x] = a;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[0] = static_cast<T>(reduction == 2 ? sh[0] : sh[0] / static_cast<double>(n));
}

template <typename T, bool L1>
__global__ void __launch_bounds__(kThreads) pointwise_bwd(const T* __restrict__ g, const T* __restrict__ x,
                                                          const T* __restrict__ y, T* __restrict__ dx, int64_t n,
                                                          int reduction) {
  const T scalar = reduction == 0 ? T(0) : (reduction == 1 ? g[0] / static_cast<T>(n) : g[0]);
  QFLOW_GRID_STRIDE(i, n) {
    const T slope = pointwise_slope<T, L1>(x[i] - y[i]);
    dx[i] = reduction == 0 ? slope * g[i] : slope * scalar;
  }
}

int pointwise_blocks(int64_t n) {
  const int64_t b = (n + 8 * kThreads - 1) / (8 * kThreads);
  return static_cast<int>(b < 1 ? 1 : (b > 1024 ? 1024 : b));
}

size_t align_up(size_t v) { return (v + 255) & ~size_t(255); }

template <typename Fn>
void by_type(Scalar s, Fn&& fn) {
  if (s == Scalar::F32) fn(float{});
  else fn(double{});
}

}  // namespace

void softmax_forward(Scalar s, bool log, const void* x, void* y, int64_t outer, int64_t D, int64_t inner,
                     cudaStream_t stream) {
  if (outer * D * inner == 0) return;
  by_type(s, [&](auto tag) {
    using T = decltype(tag);
    if (log) softmax_fwd_typed<T, true>(static_cast<const T*>(x), static_cast<T*>(y), outer, D, inner, stream);
    else softmax_fwd_typed<T, false>(static_cast<const T*>(x), static_cast<T*>(y), outer, D, inner, stream);
  });
}

void softmax_backward(Scalar s, bool log, const void* dy, const void* y, void* dx, int64_t outer, int64_t D,
                      int64_t inner, cudaStream_t stream) {
  if (outer * D * inner == 0) return;
  by_type(s, [&](auto tag) {
    using T = decltype(tag);
    if (log)
      softmax_bwd_typed<T, true>(static_cast<const T*>(dy), static_cast<const T*>(y), static_cast<T*>(dx), outer, D,
                                 inner, stream);
    else
      softmax_bwd_typed<T, false>(static_cast<const T*>(dy), static_cast<const T*>(y), static_cast<T*>(dx), outer, D,
                                  inner, stream);
  });
}

size_t class_loss_workspace_bytes(int64_t positions) {
  return align_up(static_cast<size_t>(positions) * sizeof(double)) * 2 + align_up(2 * sizeof(double));
}

namespace {
struct ClassWorkspace {
  double* loss;
  double* wt;
  double* tot;
};
ClassWorkspace carve(void* base, int64_t P) {
  char* p = static_cast<char*>(base);
  ClassWorkspace w;
  w.loss = reinterpret_cast<double*>(p);
  p += align_up(static_cast<size_t>(P) * sizeof(double));
  w.wt = reinterpret_cast<double*>(p);
  p += align_up(static_cast<size_t>(P) * sizeof(double));
  w.tot = reinterpret_cast<double*>(p);
  return w;
}
}  // namespace

void class_loss_forward(const ClassLoss& a, void* out, cudaStream_t stream) {
  const int64_t P = a.N * a.S;
  const ClassWorkspace ws = carve(a.workspace, P);
  by_type(a.scalar, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(a.self);
    const T* w = static_cast<const T*>(a.weight);
    T* o = static_cast<T*>(out);
    if (P > 0) {
      if (a.cross_entropy && a.S == 1)
        ce_rows_fwd<T><<<blocks_for(P * 32), kThreads, 0, stream>>>(x, a.target, w, a.N, a.C, a.ignore_index,
                                                                    a.smoothing, a.reduction, o, ws.loss, ws.wt);
      else if (a.cross_entropy)
        class_positions_fwd<T, true><<<blocks_for(P), kThreads, 0, stream>>>(
            x, a.target, w, a.N, a.C, a.S, a.ignore_index, a.smoothing, a.reduction, o, ws.loss, ws.wt);
      else
        class_positions_fwd<T, false><<<blocks_for(P), kThreads, 0, stream>>>(
            x, a.target, w, a.N, a.C, a.S, a.ignore_index, a.smoothing, a.reduction, o, ws.loss, ws.wt);
    }
    if (a.reduction != 0) reduce_losses<T><<<1, kReduceThreads, 0, stream>>>(ws.loss, ws.wt, P, a.reduction, o);
  });
}

void class_loss_backward(const ClassLoss& a, const void* grad, void* dx, cudaStream_t stream) {
  const int64_t P = a.N * a.S;
  if (P == 0 || a.C == 0) return;
  const ClassWorkspace ws = carve(a.workspace, P);
  by_type(a.scalar, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(a.self);
    const T* w = static_cast<const T*>(a.weight);
    const T* g = static_cast<const T*>(grad);
    T* d = static_cast<T*>(dx);
    weight_totals<T><<<1, kReduceThreads, 0, stream>>>(a.target, w, P, a.C, a.ignore_index, ws.tot);
    if (a.cross_entropy && a.S == 1)
      ce_rows_bwd<T><<<blocks_for(P * 32), kThreads, 0, stream>>>(x, a.target, w, g, ws.tot, a.N, a.C, a.ignore_index,
                                                                  a.smoothing, a.reduction, d);
    else if (a.cross_entropy)
      class_positions_bwd<T, true><<<blocks_for(P), kThreads, 0, stream>>>(
          x, a.target, w, g, ws.tot, a.N, a.C, a.S, a.ignore_index, a.smoothing, a.reduction, d);
    else
      class_positions_bwd<T, false><<<blocks_for(P), kThreads, 0, stream>>>(
          x, a.target, w, g, ws.tot, a.N, a.C, a.S, a.ignore_index, 0.0, a.reduction, d);
  });
}

size_t pointwise_workspace_bytes(int64_t n) { return align_up(static_cast<size_t>(pointwise_blocks(n)) * sizeof(double)); }

void pointwise_loss_forward(Scalar s, bool l1, const void* x, const void* y, int64_t n, int reduction, void* out,
                            void* workspace, cudaStream_t stream) {
  by_type(s, [&](auto tag) {
    using T = decltype(tag);
    const T* px = static_cast<const T*>(x);
    const T* py = static_cast<const T*>(y);
    T* po = static_cast<T*>(out);
    if (reduction == 0) {
      if (n == 0) return;
      if (l1) pointwise_none<T, true><<<blocks_for(n), kThreads, 0, stream>>>(px, py, po, n);
      else pointwise_none<T, false><<<blocks_for(n), kThreads, 0, stream>>>(px, py, po, n);
      return;
    }
    const int blocks = pointwise_blocks(n);
    double* partial = static_cast<double*>(workspace);
    if (l1) pointwise_partials<T, true><<<blocks, kThreads, 0, stream>>>(px, py, n, partial);
    else pointwise_partials<T, false><<<blocks, kThreads, 0, stream>>>(px, py, n, partial);
    pointwise_total<T><<<1, kReduceThreads, 0, stream>>>(partial, blocks, n, reduction, po);
  });
}

void pointwise_loss_backward(Scalar s, bool l1, const void* grad, const void* x, const void* y, void* dx, int64_t n,
                             int reduction, cudaStream_t stream) {
  if (n == 0) return;
  by_type(s, [&](auto tag) {
    using T = decltype(tag);
    const T* g = static_cast<const T*>(grad);
    const T* px = static_cast<const T*>(x);
    const T* py = static_cast<const T*>(y);
    T* d = static_cast<T*>(dx);
    if (l1) pointwise_bwd<T, true><<<blocks_for(n), kThreads, 0, stream>>>(g, px, py, d, n, reduction);
    else pointwise_bwd<T, false><<<blocks_for(n), kThreads, 0, stream>>>(g, px, py, d, n, reduction);
  });
}

}  // namespace qflow::cuda::sl
