#pragma once
// Anomaly detection for a model: where did the first NaN or Inf of a training step appear?
//
//   nn::DetectAnomaly anomaly(*model);   // on this thread, for the guard's lifetime
//   loss = F::cross_entropy((*model)(x), y);
//   loss.backward();                     // any NaN/Inf throws, naming module and op
//
// Turns autograd's detection on (Note [Anomaly detection] in qflow/autograd/anomaly_mode.h)
// and installs a ModuleCallHook (Note [Module call hook]) that, for every call of `root` or
// one of its submodules:
//   - checks the module's own parameters before it runs: "parameter 'layer2.0.conv1.weight'
//     of module 'layer2.0.conv1' (Conv2d) holds inf in 1 of 36864 elements";
//   - checks the inputs of the outermost call (the data);
//   - opens an AnomalyScope "module 'layer2.0.conv1' (Conv2d)", so op and backward reports
//     name the innermost module an op ran in (modules are named by their path in `root`);
//   - checks the module's outputs after it ran, which catches what no op check saw (ops on
//     tensors that do not require grad).
// Only one module call hook can be installed per thread: the guard refuses to start while
// another (fx tracing) is active, and must not be used across a trace.
#include <memory>
#include <string>
#include <unordered_map>

#include "qflow/autograd/anomaly_mode.h"
#include "qflow/nn/module.h"

namespace qflow::nn {

class DetectAnomaly {
 public:
  explicit DetectAnomaly(Module& root);
  ~DetectAnomaly();
  DetectAnomaly(const DetectAnomaly&) = delete;
  DetectAnomaly& operator=(const DetectAnomaly&) = delete;

 private:
  class Hook;
  autograd::DetectAnomalyGuard detect_;
  std::unique_ptr<Hook> hook_;
  std::unique_ptr<ModuleCallHookGuard> install_;
};

}  // namespace qflow::nn
