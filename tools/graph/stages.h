#pragma once
// The stages qflow-graph can draw, in one table (see stages.cpp). A stage turns the traced
// float model into the GraphModule to draw; adding one is writing its build function and
// naming it in the table.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "qflow/fx/fx.h"
#include "qflow/nn/module.h"

namespace qflow::tools {

/// What a stage may build on: the model (eval mode, weights loaded) and an example input.
class StageContext {
 public:
  StageContext(nn::ModulePtr model, Tensor example) : model_(std::move(model)), example_(std::move(example)) {}
  const nn::ModulePtr& model() const { return model_; }
  const Tensor& example() const { return example_; }
  /// fx::symbolic_trace of the model on the example, traced once and shared by the stages.
  std::shared_ptr<fx::GraphModule> float_graph();

 private:
  nn::ModulePtr model_;
  Tensor example_;
  std::shared_ptr<fx::GraphModule> float_graph_;
};

using StageBuild = std::function<std::shared_ptr<fx::GraphModule>(StageContext&)>;

struct Stage {
  std::string name;
  std::string description;
  /// Null while the passes the stage needs do not exist yet.
  StageBuild build;
};

/// Every stage, in pipeline order (float, fused, qat, deploy).
const std::vector<Stage>& stages();
std::vector<std::string> stage_names();
/// The stage's GraphModule; throws qflow::Error for an unknown stage or one not available yet.
std::shared_ptr<fx::GraphModule> build_stage(const std::string& name, StageContext& context);

}  // namespace qflow::tools
