#include "stages.h"

namespace qflow::tools {

std::shared_ptr<fx::GraphModule> StageContext::float_graph() {
  if (!float_graph_) float_graph_ = fx::symbolic_trace(model_, example_);
  return float_graph_;
}

namespace {

std::shared_ptr<fx::GraphModule> float_stage(StageContext& c) { return c.float_graph(); }

std::shared_ptr<fx::GraphModule> fused_stage(StageContext& c) { return fx::fuse_conv_bn(*c.float_graph()); }

}  // namespace

const std::vector<Stage>& stages() {
  static const std::vector<Stage> table{
      {"float", "the traced model as written (fx::symbolic_trace)", float_stage},
      {"fused", "Conv2d+BatchNorm2d folded for inference (fx::fuse_conv_bn)", fused_stage},
      // The quantization passes give these two their build functions.
      {"qat", "the quantization aware training model", nullptr},
      {"deploy", "the deployable quantized model", nullptr},
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
    QFLOW_CHECK(s.build != nullptr, "stage '{}' ({}) is available once quantization passes are built", s.name,
                s.description);
    return s.build(context);
  }
  QFLOW_FAIL("unknown stage '{}' (known: {})", name, fmt::join(stage_names(), ", "));
}

}  // namespace qflow::tools
