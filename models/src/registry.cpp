#include "qflow/models/registry.h"

#include <functional>
#include <map>

#include "qflow/models/resnet.h"
#include "qflow/models/small_nets.h"

namespace qflow::models {

namespace {
using Factory = std::function<nn::ModulePtr(const ModelOptions&)>;
const std::map<std::string, Factory>& factories() {
  static const std::map<std::string, Factory> f{
      {"resnet18", [](const ModelOptions& o) { return resnet18({o.num_classes, o.in_channels}); }},
      {"resnet34", [](const ModelOptions& o) { return resnet34({o.num_classes, o.in_channels}); }},
      {"resnet50", [](const ModelOptions& o) { return resnet50({o.num_classes, o.in_channels}); }},
      {"mobilenet_v2", [](const ModelOptions& o) { return mobilenet_v2({o.num_classes, o.in_channels, o.image_size}); }},
      {"alexnet", [](const ModelOptions& o) { return alexnet({o.num_classes, o.in_channels, o.image_size}); }},
      {"lenet5", [](const ModelOptions& o) { return lenet5({o.num_classes, o.in_channels, o.image_size}); }},
  };
  return f;
}
}  // namespace

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& [name, f] : factories()) names.push_back(name);
  return names;
}

nn::ModulePtr create(const std::string& name, const ModelOptions& options) {
  auto it = factories().find(name);
  QFLOW_CHECK(it != factories().end(), "models::create: unknown model '{}' (known: {})", name, fmt::join(model_names(), ", "));
  return it->second(options);
}

}  // namespace qflow::models
