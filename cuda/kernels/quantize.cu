// Quantization on the GPU: the arithmetic of quant/src/fake_quantize_kernel.cpp element by
// element, so the integer grid is the CPU's exactly (Note [Quantization numerics]).
//
// Note [Quantization arithmetic on the GPU]
// Each step is written with a correctly rounded intrinsic (__fdiv_rn, __fadd_rn, ...): x / s + z
// and (q - z) * s round once per operation as on the CPU, and nothing is contracted into an FMA
// or replaced by a reciprocal whatever the compiler's flags. rint() rounds half to even, as the
// CPU's round_half_even and std::nearbyint do. The scale and zero point are read on the device:
// the CPU kernel checks that a scale is finite and non-negative, which here would synchronise
// with the host at every quantized layer; a negative or NaN scale gives NaN instead.
#include <cuda_runtime.h>

#include "kernels/launch_config.cuh"
#include "kernels/quantize.cuh"

namespace qflow::cuda::quant {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float div_rn(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ double div_rn(double a, double b) { return __ddiv_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double sub_rn(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }

__device__ __forceinline__ int64_t channel_of(int64_t i, const Grid& g) {
  return g.channels == 1 ? 0 : (i / g.inner) % g.channels;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) fake_quantize_kernel(const T* __restrict__ x, T* __restrict__ y,
                                                                 const T* __restrict__ scale,
                                                                 const T* __restrict__ zero_point, Grid g) {
  const T lo = static_cast<T>(g.quant_min), hi = static_cast<T>(g.quant_max);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < g.n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = channel_of(i, g);
    const T s = scale[c], z = zero_point[c], v0 = x[i];
    if (s == T(0)) {  // zero range: identity
      y[i] = v0;
      continue;
    }
    T v = add_rn(div_rn(v0, s), z);
    v = v < lo ? lo : v;  // a NaN stays NaN, as on the CPU
    v = v > hi ? hi : v;
    y[i] = mul_rn(sub_rn(rint(v), z), s);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) fake_quantize_backward_kernel(const T* __restrict__ gy,
                                                                          const T* __restrict__ x, T* __restrict__ gx,
                                                                          const T* __restrict__ scale,
                                                                          const T* __restrict__ zero_point, Grid g) {
  const T lo = static_cast<T>(g.quant_min), hi = static_cast<T>(g.quant_max);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < g.n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = channel_of(i, g);
    const T s = scale[c], z = zero_point[c];
    if (s == T(0)) {
      gx[i] = gy[i];
      continue;
    }
    const T q = rint(add_rn(div_rn(x[i], s), z));
    gx[i] = (q >= lo && q <= hi) ? gy[i] : T(0);
  }
}

template <typename T, typename Q>
__global__ void __launch_bounds__(kThreads) quantize_kernel(const T* __restrict__ x, Q* __restrict__ q,
                                                            const T* __restrict__ scale,
                                                            const T* __restrict__ zero_point, Grid g) {
  const T lo = static_cast<T>(g.quant_min), hi = static_cast<T>(g.quant_max);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < g.n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = channel_of(i, g);
    T v = add_rn(div_rn(x[i], scale[c]), zero_point[c]);
    v = v >= lo ? v : lo;  // NaN takes lo (casting NaN to an integer is undefined)
    v = v > hi ? hi : v;
    q[i] = static_cast<Q>(rint(v));
  }
}

// quant/src/qparams.cpp's qparams_of, step by step: std::max/std::min as written there (a < b ?
// b : a), frexp/ldexp exact, the division and subtraction correctly rounded.
__global__ void choose_qparams_kernel(const float* __restrict__ lo_in, const float* __restrict__ hi_in,
                                      float* __restrict__ scale, float* __restrict__ zero_point, int64_t n,
                                      QParamsFormula f) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n) return;
  float lo = lo_in[c], hi = hi_in[c];
  const float alo = fabsf(lo), ahi = fabsf(hi);
  const float absmax = alo < ahi ? ahi : alo;
  float s = 0.0f, z = 0.0f;
  if (f.cambricon) {
    if (absmax != 0.0f) {
      int e = 0;
      frexpf(absmax, &e);
      s = ldexpf(1.0f, (e - 1) - static_cast<int>(f.bits - 2));
    }
  } else if (f.symmetric) {
    s = __fdiv_rn(absmax, static_cast<float>(f.quant_max));
  } else {
    lo = 0.0f < lo ? 0.0f : lo;
    hi = hi < 0.0f ? 0.0f : hi;
    s = __fdiv_rn(__fsub_rn(hi, lo), static_cast<float>(f.quant_max));
    if (s != 0.0f) z = __fsub_rn(0.0f, rintf(__fdiv_rn(lo, s)));
  }
  scale[c] = s;
  zero_point[c] = z;
}

// NaN-propagating min and max (as amin/amax and maximum on the CPU).
__device__ __forceinline__ float nan_min(float a, float b) { return (a != a || b != b) ? __int_as_float(0x7fc00000) : (b < a ? b : a); }
__device__ __forceinline__ float nan_max(float a, float b) { return (a != a || b != b) ? __int_as_float(0x7fc00000) : (a < b ? b : a); }

// The block's (min, max) of every thread's (lo, hi), NaN-propagating, in a fixed order: valid
// in thread 0. Blocks of kThreads threads.
__device__ void block_range(float& lo, float& hi) {
  __shared__ float s_lo[kThreads], s_hi[kThreads];
  s_lo[threadIdx.x] = lo;
  s_hi[threadIdx.x] = hi;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) {
      s_lo[threadIdx.x] = nan_min(s_lo[threadIdx.x], s_lo[threadIdx.x + s]);
      s_hi[threadIdx.x] = nan_max(s_hi[threadIdx.x], s_hi[threadIdx.x + s]);
    }
    __syncthreads();
  }
  lo = s_lo[0];
  hi = s_hi[0];
}

// Each block's (min, max) of its grid-stride share of x, read as float (rounding to float is
// monotone: the min of the rounded values is the rounded min).
template <typename T>
__global__ void __launch_bounds__(kThreads) range_partials_kernel(const T* __restrict__ x, int64_t n,
                                                                  float* __restrict__ part) {
  float lo = __int_as_float(0x7f800000), hi = -__int_as_float(0x7f800000);  // +inf, -inf
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = static_cast<float>(x[i]);
    lo = nan_min(lo, v);
    hi = nan_max(hi, v);
  }
  block_range(lo, hi);
  if (threadIdx.x == 0) {
    part[2 * blockIdx.x] = lo;
    part[2 * blockIdx.x + 1] = hi;
  }
}

// One block: the partials' range, then, in thread 0, the observer's update as
// quant/src/moving_average_update.h writes it (each product and the sum rounded once).
__global__ void __launch_bounds__(kThreads) moving_average_update_kernel(const float* __restrict__ part, int64_t blocks,
                                                                         float* min_val, float* max_val, int64_t* count,
                                                                         const bool* frozen, float m, float one_minus_m,
                                                                         bool symmetric) {
  float lo = __int_as_float(0x7f800000), hi = -__int_as_float(0x7f800000);
  for (int64_t b = threadIdx.x; b < blocks; b += blockDim.x) {
    lo = nan_min(lo, part[2 * b]);
    hi = nan_max(hi, part[2 * b + 1]);
  }
  block_range(lo, hi);
  if (threadIdx.x != 0) return;
  if (symmetric) {
    hi = nan_max(fabsf(lo), fabsf(hi));
    lo = -hi;
  }
  if (*count > 0) {  // the first batch seeds the average
    lo = __fadd_rn(__fmul_rn(*min_val, m), __fmul_rn(lo, one_minus_m));
    hi = __fadd_rn(__fmul_rn(*max_val, m), __fmul_rn(hi, one_minus_m));
  }
  if (*frozen) return;
  *min_val = lo;
  *max_val = hi;
  *count += 1;
}

}  // namespace

int64_t moving_average_partials(int64_t n) { return grid_blocks(n, kThreads); }

template <typename T>
void launch_observe_moving_average(const T* x, int64_t n, float* part, float* min_val, float* max_val, int64_t* count,
                                   const bool* frozen, float momentum, float one_minus_momentum, bool symmetric,
                                   cudaStream_t stream) {
  const int64_t blocks = moving_average_partials(n);
  range_partials_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(x, n, part);
  moving_average_update_kernel<<<1, kThreads, 0, stream>>>(part, blocks, min_val, max_val, count, frozen, momentum,
                                                           one_minus_momentum, symmetric);
}
template void launch_observe_moving_average<float>(const float*, int64_t, float*, float*, float*, int64_t*, const bool*,
                                                   float, float, bool, cudaStream_t);
template void launch_observe_moving_average<double>(const double*, int64_t, float*, float*, float*, int64_t*,
                                                    const bool*, float, float, bool, cudaStream_t);

void launch_choose_qparams(const float* lo, const float* hi, float* scale, float* zero_point, int64_t n,
                           QParamsFormula f, cudaStream_t stream) {
  if (n == 0) return;
  choose_qparams_kernel<<<static_cast<unsigned>((n + 127) / 128), 128, 0, stream>>>(lo, hi, scale, zero_point, n, f);
}

template <typename T>
void launch_fake_quantize(const T* x, T* y, const T* scale, const T* zero_point, Grid g, cudaStream_t stream) {
  if (g.n == 0) return;
  fake_quantize_kernel<T><<<grid_blocks(g.n, kThreads), kThreads, 0, stream>>>(x, y, scale, zero_point, g);
}

template <typename T>
void launch_fake_quantize_backward(const T* grad_out, const T* x, T* grad_in, const T* scale, const T* zero_point,
                                   Grid g, cudaStream_t stream) {
  if (g.n == 0) return;
  fake_quantize_backward_kernel<T><<<grid_blocks(g.n, kThreads), kThreads, 0, stream>>>(grad_out, x, grad_in, scale,
                                                                                        zero_point, g);
}

template <typename T, typename Q>
void launch_quantize(const T* x, Q* q, const T* scale, const T* zero_point, Grid g, cudaStream_t stream) {
  if (g.n == 0) return;
  quantize_kernel<T, Q><<<grid_blocks(g.n, kThreads), kThreads, 0, stream>>>(x, q, scale, zero_point, g);
}

#define QFLOW_QUANT_INSTANTIATE(T)                                                                           \
  template void launch_fake_quantize<T>(const T*, T*, const T*, const T*, Grid, cudaStream_t);               \
  template void launch_fake_quantize_backward<T>(const T*, const T*, T*, const T*, const T*, Grid, cudaStream_t); \
  template void launch_quantize<T, uint8_t>(const T*, uint8_t*, const T*, const T*, Grid, cudaStream_t);     \
  template void launch_quantize<T, int8_t>(const T*, int8_t*, const T*, const T*, Grid, cudaStream_t);       \
  template void launch_quantize<T, int32_t>(const T*, int32_t*, const T*, const T*, Grid, cudaStream_t);
QFLOW_QUANT_INSTANTIATE(float)
QFLOW_QUANT_INSTANTIATE(double)
#undef QFLOW_QUANT_INSTANTIATE

}  // namespace qflow::cuda::quant
