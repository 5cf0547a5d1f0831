#include "stages.h"

#include "qflow/quant/quant.h"

namespace qflow::tools {

namespace {

bool has_key_ending(const nn::StateDict& d, const std::string& suffix) {
  for (const auto& [key, t] : d)
    if (key.size() >= suffix.size() && key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0) return true;
  return false;
}

const char* kind_name(WeightsKind k) {
  switch (k) {
    case WeightsKind::Float: return "a float model's";
    case WeightsKind::Qat: return "a QAT model's";
    case WeightsKind::Deploy: return "a deploy model's";
  }
  return "";
}

}  // namespace

WeightsKind weights_kind(const nn::StateDict& weights) {
  if (has_key_ending(weights, ".input_observer.min_val")) return WeightsKind::Qat;
  if (has_key_ending(weights, ".input_scale")) return WeightsKind::Deploy;
  return WeightsKind::Float;
}

void StageContext::check_weights_for(const std::string& stage, std::initializer_list<WeightsKind> accepted) const {
  if (!quant_weights_) return;
  const WeightsKind kind = weights_kind(*quant_weights_);
  for (WeightsKind k : accepted)
    if (k == kind) return;
  QFLOW_FAIL("--weights holds {} state, which the {} stage cannot draw (QAT weights: --stage qat or deploy; deploy "
             "weights: --stage deploy)",
             kind_name(kind), stage);
}

std::shared_ptr<fx::GraphModule> StageContext::float_graph() {
  if (!float_graph_) float_graph_ = fx::symbolic_trace(model_, example_);
  return float_graph_;
}

std::shared_ptr<fx::GraphModule> StageContext::qat_graph() {
  auto qat = quant::quantization_aware_training(*float_graph(), example_, mapping_);
  qat->eval();
  if (quant_weights_ && weights_kind(*quant_weights_) == WeightsKind::Qat) qat->load_state_dict(*quant_weights_);
  else quant::calibrate(*qat, calibration_.empty() ? std::vector<Tensor>{example_} : calibration_);
  quant::annotate_quant_meta(*qat);
  return qat;
}

std::shared_ptr<fx::GraphModule> StageContext::deploy_graph() {
  auto deploy = quant::dequantization_aware_training(*float_graph(), *qat_graph(), example_, mapping_);
  if (quant_weights_ && weights_kind(*quant_weights_) == WeightsKind::Deploy) {
    nn::StateDict weights = *quant_weights_;
    // Float weights of an older qflow, which had one QConfig for every layer.
    if (mapping_.global()) quant::upgrade_deploy_state_dict(weights, *mapping_.global());
    deploy->load_state_dict(weights);
    quant::annotate_quant_meta(*deploy);
  }
  return deploy;
}

namespace {

std::shared_ptr<fx::GraphModule> float_stage(StageContext& c) {
  c.check_weights_for("float", {});
  return c.float_graph();
}

std::shared_ptr<fx::GraphModule> fused_stage(StageContext& c) {
  c.check_weights_for("fused", {});
  return fx::fuse_conv_bn(*c.float_graph());
}

std::shared_ptr<fx::GraphModule> qat_stage(StageContext& c) {
  c.check_weights_for("qat", {WeightsKind::Qat});
  return c.qat_graph();
}

std::shared_ptr<fx::GraphModule> deploy_stage(StageContext& c) {
  c.check_weights_for("deploy", {WeightsKind::Qat, WeightsKind::Deploy});
  return c.deploy_graph();
}

}  // namespace

const std::vector<Stage>& stages() {
  static const std::vector<Stage> table{
      {"float", "the traced model as written (fx::symbolic_trace)", float_stage},
      {"fused", "Conv2d+BatchNorm2d folded for inference (fx::fuse_conv_bn)", fused_stage},
      {"qat", "the quantization aware model (quant::quantization_aware_training)", qat_stage},
      {"deploy", "the deployable model, BN folded, scales fixed (quant::dequantization_aware_training)", deploy_stage},
  };
  return table;
}

std::vector<std::string> stage_names() {
  std::vector<std::string> names;
  for (const Stage& s : stages()) names.push_back(s.name);
  return names;
}

std::shared_ptr<fx::GraphModule> build_stage(const std::string& name, StageContext& context) {
  for (const Stage& s : stages()) {
    if (s.name != name) continue;
    return s.build(context);
  }
  QFLOW_FAIL("unknown stage '{}' (known: {})", name, fmt::join(stage_names(), ", "));
}

}  // namespace qflow::tools
