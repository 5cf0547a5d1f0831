// The choose_qparams op: the scale and zero point of Note [Quantization numerics] for observed
// ranges, as a tensor op so that an observer's statistics never leave their device. On the CPU
// its kernel is range_qparams per channel (qparams.cpp), with its checks; the CUDA kernel
// (cuda/kernels/quantize_ops.cpp) computes the same float32 steps on the GPU, where a check
// would mean reading the range back to the host at every quantized layer.
#include <cmath>
#include <tuple>
#include <vector>

#include "qflow/autograd/derivatives.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/factory.h"
#include "qflow/core/op_registry.h"
#include "qflow/quant/qparams.h"

namespace qflow::quant {
namespace {

QConfig grid_config(const OpArgs& a) {
  QConfig qc;
  qc.bits = a.to_int("bits");
  qc.scheme = a.to_bool("symmetric") ? Scheme::Symmetric : Scheme::Affine;
  qc.formula = a.to_bool("cambricon") ? Formula::Cambricon : Formula::Google;
  qc.validate();
  return qc;
}

std::vector<TensorMeta> choose_qparams_meta(const OpArgs& a) {
  const Tensor& min = a.tensor("min");
  const Tensor& max = a.tensor("max");
  (void)grid_config(a);
  QFLOW_CHECK(min.sizes() == max.sizes() && min.dim() <= 1 && min.numel() > 0,
              "choose_qparams: min and max must be 0-d or 1-d tensors of the same shape, got {} and {}", min.sizes(),
              max.sizes());
  QFLOW_CHECK(min.dtype() == DType::Float32 && max.dtype() == DType::Float32,
              "choose_qparams: min and max must be float32, got {} and {}", min.dtype(), max.dtype());
  const std::vector<int64_t> sizes{min.numel()};
  return {TensorMeta{sizes, DType::Float32}, TensorMeta{sizes, DType::Float32}};
}

Stack choose_qparams_kernel(OpArgs& a) {
  (void)choose_qparams_meta(a);
  const QConfig qc = grid_config(a);
  const std::vector<float> lo = to_vector<float>(a.tensor("min"));
  const std::vector<float> hi = to_vector<float>(a.tensor("max"));
  std::vector<float> scale(lo.size()), zero_point(lo.size());
  for (size_t c = 0; c < lo.size(); ++c) {
    QFLOW_CHECK(std::isfinite(lo[c]) && std::isfinite(hi[c]) && lo[c] <= hi[c],
                "compute_qparams: invalid range [{}, {}] (channel {})", lo[c], hi[c], c);
    std::tie(scale[c], zero_point[c]) = range_qparams(lo[c], hi[c], qc);
  }
  const int64_t n = static_cast<int64_t>(lo.size());
  return {Value(from_vector<float>(scale, {n})), Value(from_vector<float>(zero_point, {n}))};
}

}  // namespace

std::pair<Tensor, Tensor> choose_qparams(const Tensor& min, const Tensor& max, const QConfig& qconfig) {
  static const OpHandle op("choose_qparams");
  const Stack out = call(op, {{"min", min}, {"max", max}, {"bits", qconfig.bits},
                              {"symmetric", qconfig.scheme == Scheme::Symmetric},
                              {"cambricon", qconfig.formula == Formula::Cambricon}});
  return {out[0].tensor(), out[1].tensor()};
}

}  // namespace qflow::quant

// The registration of quant/ops/choose_qparams.toml (Note [One declaration per op]).
#include "quant/ops/choose_qparams.inc"

#include "quant/src/ops/choose_qparams.derivatives.inc"
