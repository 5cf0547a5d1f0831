#include "qflow/quant/deployed_weight.h"

#include "qflow/autograd/grad_mode.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"
#include "qflow/quant/fake_quantize.h"

namespace qflow::quant::detail {

DType weight_integer_type(const QConfig& qconfig) {
  if (qconfig.bits > 8) return DType::Int32;
  return qconfig.scheme == Scheme::Affine ? DType::UInt8 : DType::Int8;
}

Tensor per_output_channel(const Tensor& values, int64_t dim) {
  if (values.numel() == 1) return values.reshape({});
  SymIntList sizes(static_cast<size_t>(dim), SymInt(1));
  sizes[0] = values.numel();
  return values.reshape(sizes);
}

GridIntegers grid_integers(const Tensor& weight, const Tensor& scale, const Tensor& zero_point, const QConfig& qconfig) {
  NoGradGuard no_grad;
  const Tensor w = weight.detach();
  // quantize has no grid for a scale of 0; any positive stand-in maps a 0 weight to the zero
  // point, which dequantizes to 0 again, and anything else of that channel fails the check.
  const Tensor zero = eq(scale, 0.0);
  const Tensor usable_scale = where(zero, ones_like(scale), scale);
  Tensor q = quantize(w, usable_scale, zero_point, qconfig.quant_min(), qconfig.quant_max(), 0,
                      weight_integer_type(qconfig));
  const Tensor differs = ne(dequantize_weight(q, scale, zero_point), w).to(DType::UInt8).contiguous();
  const uint8_t* d = differs.data_ptr<uint8_t>();
  for (int64_t i = 0; i < differs.numel(); ++i)
    if (d[i] != 0) return {Tensor(), i};
  return {std::move(q), -1};
}

Tensor dequantize_weight(const Tensor& weight, const Tensor& scale, const Tensor& zero_point) {
  if (weight.is_floating_point()) return weight;
  NoGradGuard no_grad;
  const DType type = scale.dtype();
  return (weight.to(type) - per_output_channel(zero_point.to(type), weight.dim())) *
         per_output_channel(scale, weight.dim());
}

const Tensor& cached_float_weight(VersionedCache<Tensor>& cache, const Tensor& weight, const Tensor& scale,
                                  const Tensor& zero_point) {
  if (weight.is_floating_point()) return weight;
  return cache.get({&weight, &scale, &zero_point},
                   [&] { return dequantize_weight(weight, scale, zero_point).contiguous(); });
}

}  // namespace qflow::quant::detail
