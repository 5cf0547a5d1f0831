#include "qflow/quant/deploy_upgrade.h"

#include "qflow/core/factory.h"
#include "qflow/quant/deployed_weight.h"

namespace qflow::quant {

size_t upgrade_deploy_state_dict(nn::StateDict& dict, const QConfig& qconfig) {
  size_t converted = 0;
  for (const std::string& key : dict.keys()) {
    if (!key.ends_with(".weight") && key != "weight") continue;
    const std::string layer = key.substr(0, key.size() - std::string("weight").size());
    const Tensor* scale = dict.find(layer + "weight_scale");
    const Tensor* zero_point = dict.find(layer + "weight_zero_point");
    const Tensor& weight = dict.at(key);
    if (scale == nullptr || zero_point == nullptr || !weight.is_floating_point()) continue;
    bool quantized = false;
    for (float s : to_vector<float>(*scale)) quantized = quantized || s != 0.0f;
    if (!quantized) continue;  // a layer deployed without quantization keeps its float weight
    const detail::GridIntegers grid = detail::grid_integers(weight, *scale, *zero_point, qconfig);
    if (!grid.integers.defined()) {
      const float value = to_vector<float>(weight.reshape({-1}))[static_cast<size_t>(grid.off_grid)];
      QFLOW_FAIL("upgrade_deploy_state_dict: {} element {} ({}) is not on its {} grid; was the state_dict saved with "
                 "another QConfig, or its weight changed after deployment?",
                 key, grid.off_grid, value, qconfig.to_string());
    }
    dict.insert_or_assign(key, grid.integers);
    ++converted;
  }
  return converted;
}

}  // namespace qflow::quant
