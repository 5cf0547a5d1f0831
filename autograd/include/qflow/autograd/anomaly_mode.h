#pragma once
// Anomaly detection: find where the first NaN or Inf of a training step came from
// (PyTorch's torch.autograd.set_detect_anomaly, extended to the forward pass).
//
//   autograd::DetectAnomalyGuard anomaly;   // or autograd::set_detect_anomaly(true)
//   loss = model(x) ...; loss.backward();   // throws at the first non-finite value
//
// Note [Anomaly detection]
// While detection is on, the autograd layer checks the floating outputs of every op it
// records (every op with an input that requires grad) and the engine checks every gradient a
// backward node returns. The first NaN or Inf throws a qflow::Error naming
//   - forward: the op, the output, how many elements are NaN/Inf, and whether an input was
//     already non-finite (then the value came from outside the checked ops: a parameter,
//     buffer or data) or all inputs were finite (this op made it);
//   - backward: the node ("LinearBackward"), the input whose gradient is non-finite;
// and, in both, the innermost AnomalyScope active when the op ran forward (nn::DetectAnomaly
// opens one per module call, so reports say "in module 'layer2.0.conv1' (Conv2d)"). Backward
// nodes remember their forward scope only while detection is on, so recording costs nothing
// otherwise; the check itself is one pass over each output, so detection is for debugging
// runs, not for production training. Ops that return Inf on purpose (masking with -inf) are
// reported like any other: turn detection off around them.
// Detection is process-wide, as in PyTorch; scopes are per thread.
#include <string>

#include "qflow/core/tensor.h"

namespace qflow::autograd {

/// Whether anomaly detection is on.
bool is_anomaly_enabled();
/// Turns anomaly detection on or off for the whole process.
void set_detect_anomaly(bool enabled);

/// Sets anomaly detection for its lifetime (on by default), then restores the previous setting.
class DetectAnomalyGuard {
 public:
  explicit DetectAnomalyGuard(bool enabled = true);
  ~DetectAnomalyGuard();
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool previous_;
};

/// Names what runs on this thread for anomaly reports ("module 'fc1' (Linear)"), for its
/// lifetime; scopes nest, reports name the innermost.
class AnomalyScope {
 public:
  explicit AnomalyScope(std::string name);
  ~AnomalyScope();
  AnomalyScope(const AnomalyScope&) = delete;
  AnomalyScope& operator=(const AnomalyScope&) = delete;
};

/// The innermost AnomalyScope's name on this thread, or "" outside any.
const std::string& current_anomaly_scope();

/// "" when `t` is undefined, not floating, or all finite; otherwise what it holds, e.g.
/// "nan in 3 of 120 elements" or "nan in 1 and inf in 2 of 120 elements".
std::string describe_non_finite(const Tensor& t);

}  // namespace qflow::autograd
