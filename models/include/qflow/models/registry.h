#pragma once
// The model zoo by name, for tools: models::create("resnet18", {...}).
#include <string>
#include <vector>

#include "qflow/nn/module.h"

namespace qflow::models {

struct ModelOptions {
  int64_t num_classes = 10;
  int64_t in_channels = 3;
  int64_t image_size = 32;
};

/// Names accepted by create(), sorted.
std::vector<std::string> model_names();
/// A freshly initialised model; throws qflow::Error listing the known names for a bad one.
nn::ModulePtr create(const std::string& name, const ModelOptions& options = {});

}  // namespace qflow::models
