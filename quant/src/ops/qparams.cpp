#include "qflow/quant/qparams.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "qflow/autograd/grad_mode.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"
#include "qflow/quant/fake_quantize.h"

namespace qflow::quant {
namespace {

// floor(log2(a)) for a finite a > 0, exactly (frexp: a = m · 2^e with m in [0.5, 1)).
int floor_log2(float a) {
  int e = 0;
  std::frexp(a, &e);
  return e - 1;
}

// One channel's (scale, zero_point); see Note [Quantization numerics]. float32 throughout.
std::pair<float, float> qparams_of(float lo, float hi, const QConfig& qc) {
  const float absmax = std::max(std::fabs(lo), std::fabs(hi));
  if (qc.formula == Formula::Cambricon) {
    if (absmax == 0.0f) return {0.0f, 0.0f};
    const int shift = floor_log2(absmax) - static_cast<int>(qc.bits - 2);
    return {std::ldexp(1.0f, shift), 0.0f};
  }
  if (qc.scheme == Scheme::Symmetric) return {absmax / static_cast<float>(qc.quant_max()), 0.0f};
  // The grid covers 0 exactly (zero padding and ReLU's zeros stay exact, the zero point lies on
  // the grid, as integer kernels need): the range is widened to include it.
  lo = std::min(lo, 0.0f);
  hi = std::max(hi, 0.0f);
  const float scale = (hi - lo) / static_cast<float>(qc.quant_max());  // quant_max = 2^b - 1
  if (scale == 0.0f) return {0.0f, 0.0f};
  return {scale, 0.0f - std::nearbyint(lo / scale)};  // in [0, quant_max]; 0 - v keeps a zero point of 0 positive
}

}  // namespace

std::pair<float, float> range_qparams(float min, float max, const QConfig& qconfig) { return qparams_of(min, max, qconfig); }

QParams compute_qparams(const Tensor& min, const Tensor& max, const QConfig& qconfig, int64_t axis) {
  qconfig.validate();
  QFLOW_CHECK(min.defined() && max.defined() && min.sizes() == max.sizes() && min.dim() <= 1 && min.numel() > 0,
              "compute_qparams: min and max must be 0-d or 1-d tensors of the same shape, got {} and {}",
              min.defined() ? fmt::format("{}", min.sizes()) : "undefined",
              max.defined() ? fmt::format("{}", max.sizes()) : "undefined");
  QFLOW_CHECK(min.is_floating_point() && max.is_floating_point(),
              "compute_qparams: min and max must be floating point, got {} and {}", min.dtype(), max.dtype());
  NoGradGuard no_grad;
  auto [scale, zero_point] = choose_qparams(min.to(DType::Float32), max.to(DType::Float32), qconfig);
  return QParams{std::move(scale), std::move(zero_point), axis};
}

Range tensor_range(const Tensor& x, bool per_channel) {
  NoGradGuard no_grad;  // records nothing; x itself, so a blocked activation stays blocked
  const Tensor& d = x;
  QFLOW_CHECK(d.is_floating_point() && d.numel() > 0, "tensor_range: expected a non-empty floating point tensor, got {} {}",
              d.sizes(), d.dtype());
  if (!per_channel || d.dim() == 0) return {amin(d).reshape({1}).to(DType::Float32), amax(d).reshape({1}).to(DType::Float32)};
  if (d.dim() == 1) return {d.to(DType::Float32).clone(), d.to(DType::Float32).clone()};  // one element per channel
  IntList rest;
  for (int64_t i = 1; i < d.dim(); ++i) rest.push_back(i);
  return {amin(d, rest).to(DType::Float32), amax(d, rest).to(DType::Float32)};
}

Tensor fake_quantize(const Tensor& x, const QParams& qparams, const QConfig& qconfig) {
  return fake_quantize(x, qparams.scale, qparams.zero_point, qconfig.quant_min(), qconfig.quant_max(), qparams.axis,
                       qconfig.ste == Ste::Clipped);
}

}  // namespace qflow::quant
