#include "qflow/quant/integer_form.h"

#include "qflow/autograd/grad_mode.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"

namespace qflow::quant::detail {

std::string integer_unsupported(const DeployedTensors& t, const QConfig& qconfig) {
  if (qconfig.bits > 8) return fmt::format("{} bits do not fit int8", qconfig.bits);
  if (qconfig.activations().bits > 8) return fmt::format("{}-bit activations do not fit int8", qconfig.activations().bits);
  if (to_vector<float>(t.input_scale)[0] <= 0.0f) return "the input scale is 0 (an empty or all-zero range)";
  for (float s : to_vector<float>(t.weight_scale))
    if (s <= 0.0f) return "a weight scale is 0 (an all-zero output channel)";
  for (float z : to_vector<float>(t.weight_zero_point))
    if (z != 0.0f) return "the weights have a zero point (affine weights)";
  // An affine grid whose zero point happens to be 0 still stores uint8 [0, 255].
  if (t.weight.dtype() != DType::Int8) return fmt::format("the weights are {}, not int8", t.weight.dtype());
  return "";
}

DType input_integer_type(const QConfig& qconfig) {
  return qconfig.scheme == Scheme::Affine ? DType::UInt8 : DType::Int8;
}

namespace {

IntegerForm make_integer_form(const DeployedTensors& t, const QConfig& qconfig, const std::optional<OutputGrid>& grid,
                              const std::string& layer_unsupported) {
  NoGradGuard no_grad;
  IntegerForm f;
  f.unsupported = !layer_unsupported.empty() ? layer_unsupported : integer_unsupported(t, qconfig);
  if (f.unsupported.empty()) {
    f.weight = t.weight.detach();  // the grid integers themselves (Note [Deployed module layout])
    f.output_scale = (t.weight_scale * t.input_scale).contiguous();
    f.bias = t.bias.defined() ? t.bias.detach() : Tensor();
    f.input_zero_point = static_cast<int64_t>(to_vector<float>(t.input_zero_point)[0]);
    if (grid) {
      // Requantized in the kernel: round(y / s_next) + z_next, y's scale and bias divided through.
      const Tensor next_scale = grid->scale.detach().reshape({});
      f.output_scale = (f.output_scale / next_scale).contiguous();
      if (f.bias.defined()) f.bias = (f.bias / next_scale).contiguous();
      f.output = {input_integer_type(grid->qconfig), static_cast<int64_t>(to_vector<float>(grid->zero_point)[0]),
                  grid->qconfig.quant_min(), grid->qconfig.quant_max()};
    }
  }
  return f;
}

}  // namespace

const IntegerForm& cached_integer_form(VersionedCache<IntegerForm>& cache, const DeployedTensors& t,
                                       const QConfig& qconfig, const std::optional<OutputGrid>& grid,
                                       const std::string& layer_unsupported) {
  const Tensor none;
  return cache.get({&t.weight, &t.bias, &t.input_scale, &t.input_zero_point, &t.weight_scale, &t.weight_zero_point,
                    grid ? &grid->scale : &none, grid ? &grid->zero_point : &none},
                   [&] { return make_integer_form(t, qconfig, grid, layer_unsupported); });
}

}  // namespace qflow::quant::detail
