#pragma once
// Launchers of the quantization kernels (quantize.cu): fake_quantize, its backward and
// quantize on the GPU, registered by quantize_ops.cpp for the ops quant/ declares.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace qflow::cuda::quant {

/// Element i of a tensor walked in storage order belongs to channel (i / inner) % channels
/// (per tensor: channels = 1). scale and zero_point hold `channels` values of the compute type.
struct Grid {
  int64_t n = 0, channels = 1, inner = 1;
  int64_t quant_min = 0, quant_max = 0;
};

/// y = (clamp(round(x / s + z), lo, hi) - z) * s, y = x where s == 0 (T: float or double).
template <typename T>
void launch_fake_quantize(const T* x, T* y, const T* scale, const T* zero_point, Grid g, cudaStream_t stream);

/// grad_in = grad_out where round(x / s + z) lies in [lo, hi], else 0 (grad_out where s == 0).
template <typename T>
void launch_fake_quantize_backward(const T* grad_out, const T* x, T* grad_in, const T* scale, const T* zero_point,
                                   Grid g, cudaStream_t stream);

/// The integers fake_quantize rounds to, clamp(round(x / s + z), lo, hi) as Q (uint8, int8,
/// int32); NaN takes lo.
template <typename T, typename Q>
void launch_quantize(const T* x, Q* q, const T* scale, const T* zero_point, Grid g, cudaStream_t stream);

/// choose_qparams: one (scale, zero_point) per range [lo[c], hi[c]], c < n, by quant's formulas
/// (Note [Quantization numerics]): cambricon (power-of-two scales), else symmetric or affine.
struct QParamsFormula {
  int64_t bits = 8, quant_max = 127;
  bool symmetric = true, cambricon = false;
};
void launch_choose_qparams(const float* lo, const float* hi, float* scale, float* zero_point, int64_t n,
                           QParamsFormula f, cudaStream_t stream);

/// observe_moving_average_ (quant/src/observe_moving_average.cpp) in two launches: the range of
/// x's n elements (T: float or double, read in storage order), then the update of the one-element
/// min_val/max_val (float), count (int64) and the frozen flag (bool), in one thread.
/// `part` holds 2 floats per block of the first launch: moving_average_partials() of them.
int64_t moving_average_partials(int64_t n);
template <typename T>
void launch_observe_moving_average(const T* x, int64_t n, float* part, float* min_val, float* max_val, int64_t* count,
                                   const bool* frozen, float momentum, float one_minus_momentum, bool symmetric,
                                   cudaStream_t stream);

}  // namespace qflow::cuda::quant
