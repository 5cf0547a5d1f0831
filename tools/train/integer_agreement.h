#pragma once
// The deploy model in integers against its float simulation on a test set (issue 19's
// acceptance figure): each model's accuracy and the share of images on which both pick the
// same class. See Note [Integer activations] in quant/include/qflow/quant/deploy.h: the two
// compute the same function except where an activation sits on a rounding tie, so their
// argmax should agree on nearly every image and their accuracies within a few hundredths.
#include <cstdint>
#include <string>

#include "qflow/data/data_loader.h"
#include "qflow/nn/module.h"

namespace qflow::tools {

struct IntegerAgreement {
  double integer_accuracy = 0;    // %, the model as deployed (its integer layers on)
  double simulated_accuracy = 0;  // %, quant::set_integer(model, false)
  double same_argmax = 0;         // %, images on which both predict the same class
  int64_t images = 0;
  int64_t integer_layers = 0, layers = 0;  // DConv2d/DLinear that run int8, of all of them
};

/// Runs every batch of `loader` through `deploy` in integers and in the float simulation (the
/// same modules, switched with quant::set_integer; left in integers). Eval mode, no gradients.
IntegerAgreement measure_integer_agreement(nn::Module& deploy, data::DataLoader& loader);

/// "deploy (int8)" when every deployed layer runs int8, "deploy (float)" when none does (the
/// simulation, e.g. affine weights), "deploy (19/21 int8)" in between.
std::string integer_stage(const std::string& stage, const IntegerAgreement& a);

}  // namespace qflow::tools
