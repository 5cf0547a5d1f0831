// Anomaly detection for a model. See nn/anomaly.h.
#include "qflow/nn/anomaly.h"

#include <fmt/format.h>

namespace qflow::nn {

class DetectAnomaly::Hook final : public ModuleCallHook {
 public:
  explicit Hook(Module& root) {
    for (const auto& [path, m] : root.named_modules()) paths_.emplace(m.get(), path);
  }

  TensorList call(Module& module, const TensorList& inputs, const Forward& run_forward) override {
    const auto it = paths_.find(&module);
    const std::string path = it == paths_.end() ? "<not in the model>" : it->second.empty() ? "<root>" : it->second;
    const std::string label = fmt::format("module '{}' ({})", path, module.type_name());
    for (const auto& [name, p] : module.named_parameters(/*recurse=*/false)) {
      const std::string bad = autograd::describe_non_finite(p);
      QFLOW_CHECK(bad.empty(), "detect_anomaly: parameter '{}' of {} holds {} before the module runs", qualified(path, name),
                  label, bad);
    }
    if (depth_ == 0) {
      for (size_t i = 0; i < inputs.size(); ++i) {
        const std::string bad = autograd::describe_non_finite(inputs[i]);
        QFLOW_CHECK(bad.empty(), "detect_anomaly: input {} (shape {}) of {} holds {}: the data is not finite", i,
                    inputs[i].sizes(), label, bad);
      }
    }
    ++depth_;
    TensorList outputs;
    try {
      autograd::AnomalyScope scope(label);
      outputs = run_forward(inputs);
    } catch (...) {
      --depth_;
      throw;
    }
    --depth_;
    for (size_t i = 0; i < outputs.size(); ++i) {
      const std::string bad = autograd::describe_non_finite(outputs[i]);
      QFLOW_CHECK(bad.empty(), "detect_anomaly: forward: {} returned {} in output {} of shape {} (made by ops that record "
                  "no gradient, so no op check saw it)", label, bad, i, outputs[i].sizes());
    }
    return outputs;
  }

 private:
  static std::string qualified(const std::string& path, const std::string& name) {
    return path.empty() || path.front() == '<' ? name : path + "." + name;
  }
  std::unordered_map<const Module*, std::string> paths_;
  int depth_ = 0;
};

DetectAnomaly::DetectAnomaly(Module& root) : hook_(std::make_unique<Hook>(root)) {
  QFLOW_CHECK(module_call_hook() == nullptr,
              "DetectAnomaly: another module call hook (fx tracing?) is installed on this thread; anomaly detection cannot "
              "run inside it");
  install_ = std::make_unique<ModuleCallHookGuard>(hook_.get());
}

DetectAnomaly::~DetectAnomaly() = default;

}  // namespace qflow::nn
