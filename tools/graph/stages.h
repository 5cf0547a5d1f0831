#pragma once
// The stages qflow-graph can draw, in one table (see stages.cpp). A stage turns the traced
// float model into the GraphModule to draw; adding one is writing its build function and
// naming it in the table.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qflow/fx/fx.h"
#include "qflow/nn/module.h"
#include "qflow/nn/state_dict.h"
#include "qflow/quant/qconfig_mapping.h"

namespace qflow::tools {

/// What a --weights file holds: a float model's state_dict, a QAT model's (observer
/// statistics, from qflow-train --qat) or a deploy model's (fixed scales, deploy.safetensors).
enum class WeightsKind { Float, Qat, Deploy };
WeightsKind weights_kind(const nn::StateDict& weights);

/// What a stage may build on: the model (eval mode, float weights loaded), an example input,
/// the QConfig mapping of the quantized stages and, optionally, quantized weights (QAT or deploy).
class StageContext {
 public:
  StageContext(nn::ModulePtr model, Tensor example, quant::QConfigMapping mapping = quant::QConfigMapping(quant::QConfig{}),
               std::optional<nn::StateDict> quant_weights = std::nullopt)
      : model_(std::move(model)), example_(std::move(example)), mapping_(std::move(mapping)),
        quant_weights_(std::move(quant_weights)) {}
  const nn::ModulePtr& model() const { return model_; }
  const Tensor& example() const { return example_; }
  const quant::QConfigMapping& mapping() const { return mapping_; }
  /// fx::symbolic_trace of the model on the example, traced once and shared by the stages.
  std::shared_ptr<fx::GraphModule> float_graph();
  /// The QAT model of float_graph() with scales known: QAT weights loaded when given, else
  /// its observers calibrated on set_calibration's batches (default: the example input).
  std::shared_ptr<fx::GraphModule> qat_graph();
  /// The deploy model of qat_graph(), with deploy weights loaded when given.
  std::shared_ptr<fx::GraphModule> deploy_graph();
  /// Throws unless the quantized weights (if any) are of a kind `stage` can draw.
  void check_weights_for(const std::string& stage, std::initializer_list<WeightsKind> accepted) const;
  /// The kind of the quantized weights; Float when none were given.
  WeightsKind quant_weights_kind() const { return quant_weights_ ? weights_kind(*quant_weights_) : WeightsKind::Float; }
  /// Batches qat_graph() calibrates on when it has no QAT weights (default: the example).
  void set_calibration(std::vector<Tensor> batches) { calibration_ = std::move(batches); }

 private:
  nn::ModulePtr model_;
  Tensor example_;
  quant::QConfigMapping mapping_;
  std::optional<nn::StateDict> quant_weights_;
  std::shared_ptr<fx::GraphModule> float_graph_;
  std::vector<Tensor> calibration_;
};

using StageBuild = std::function<std::shared_ptr<fx::GraphModule>(StageContext&)>;

struct Stage {
  std::string name;
  std::string description;
  StageBuild build;
};

/// Every stage, in pipeline order (float, fused, qat, deploy).
const std::vector<Stage>& stages();
std::vector<std::string> stage_names();
/// The stage's GraphModule; throws qflow::Error for an unknown stage.
std::shared_ptr<fx::GraphModule> build_stage(const std::string& name, StageContext& context);

}  // namespace qflow::tools
