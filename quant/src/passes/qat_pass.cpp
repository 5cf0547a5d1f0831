// quantization_aware_training and quantizable_layers. The rewrite it shares with prepare_ptq
// (Note [QAT rewrite] in passes.h) is in pass_util.cpp.
#include <algorithm>

#include "pass_util.h"

namespace qflow::quant {

std::map<std::string, std::string> quantizable_layers(const fx::GraphModule& gm) {
  const auto& types = quantizable_types();
  std::map<std::string, std::string> layers;
  for (const fx::Node* n : gm.graph()) {
    if (n->op() != fx::NodeOp::CallModule) continue;
    const std::string type = gm.get_submodule(n->target())->type_name();
    if (std::find(types.begin(), types.end(), type) != types.end()) layers.emplace(n->target(), type);
  }
  return layers;
}

std::shared_ptr<fx::GraphModule> quantization_aware_training(const fx::GraphModule& gm, const TensorList& examples,
                                                             const QConfigMapping& mapping, PassSummary* summary) {
  PassSummary s = detail::begin_pass("quantization_aware_training", gm, mapping);
  detail::ScratchGenerator keep_callers_stream;
  auto qat = detail::copy_graph_module(gm);
  detail::quantize_in_place(*qat, s);
  detail::finish_pass(*qat, examples, s);
  if (summary != nullptr) *summary = std::move(s);
  return qat;
}

std::shared_ptr<fx::GraphModule> quantization_aware_training(const fx::GraphModule& gm, const Tensor& example,
                                                             const QConfigMapping& mapping, PassSummary* summary) {
  return quantization_aware_training(gm, TensorList{example}, mapping, summary);
}

std::shared_ptr<fx::GraphModule> quantization_aware_training(const fx::GraphModule& gm, const Tensor& example,
                                                             const QConfig& qconfig, PassSummary* summary) {
  return quantization_aware_training(gm, TensorList{example}, QConfigMapping(qconfig), summary);
}

}  // namespace qflow::quant
