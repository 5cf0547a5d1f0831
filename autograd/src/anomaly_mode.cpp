// Anomaly detection switches, scopes and the finiteness check. See Note [Anomaly detection].
#include "qflow/autograd/anomaly_mode.h"

#include <fmt/format.h>

#include <atomic>
#include <cmath>
#include <vector>

#include "anomaly_check.h"
#include "qflow/autograd/grad_mode.h"

namespace qflow::autograd {

namespace {

std::atomic<bool> g_anomaly_enabled{false};
thread_local std::vector<std::string> t_scopes;

template <class T>
void count_non_finite(const Tensor& contiguous, int64_t& nan, int64_t& inf) {
  const T* p = contiguous.data_ptr<T>();
  const int64_t n = contiguous.numel();
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(p[i])) ++nan;
    else if (std::isinf(p[i])) ++inf;
  }
}

}  // namespace

bool is_anomaly_enabled() { return g_anomaly_enabled.load(std::memory_order_relaxed); }
void set_detect_anomaly(bool enabled) { g_anomaly_enabled.store(enabled, std::memory_order_relaxed); }

DetectAnomalyGuard::DetectAnomalyGuard(bool enabled) : previous_(is_anomaly_enabled()) { set_detect_anomaly(enabled); }
DetectAnomalyGuard::~DetectAnomalyGuard() { set_detect_anomaly(previous_); }

AnomalyScope::AnomalyScope(std::string name) { t_scopes.push_back(std::move(name)); }
AnomalyScope::~AnomalyScope() { t_scopes.pop_back(); }

const std::string& current_anomaly_scope() {
  static const std::string none;
  return t_scopes.empty() ? none : t_scopes.back();
}

std::string describe_non_finite(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype()) || t.numel() == 0) return "";
  NoGradGuard no_grad;
  // Counted on the host: anomaly mode trades speed for the answer (a device tensor is copied back).
  const Tensor c = t.detach().to(Device::cpu()).contiguous();
  int64_t nan = 0, inf = 0;
  if (c.dtype() == DType::Float32) count_non_finite<float>(c, nan, inf);
  else count_non_finite<double>(c, nan, inf);
  if (nan == 0 && inf == 0) return "";
  if (nan > 0 && inf > 0) return fmt::format("nan in {} and inf in {} of {} elements", nan, inf, c.numel());
  return fmt::format("{} in {} of {} elements", nan > 0 ? "nan" : "inf", nan > 0 ? nan : inf, c.numel());
}

}  // namespace qflow::autograd

namespace qflow::autograd::detail {

namespace {
// " in module 'fc1' (Linear)", or "" outside any scope.
std::string where(const std::string& scope) { return scope.empty() ? "" : " in " + scope; }
}  // namespace

void check_forward_outputs(std::string_view op, const TensorList& inputs, const Stack& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].is_tensor()) continue;
    const Tensor& out = outputs[i].tensor();
    const std::string bad = describe_non_finite(out);
    if (bad.empty()) continue;
    std::string cause = "all its inputs were finite, so this op produced it";
    for (size_t j = 0; j < inputs.size(); ++j) {
      if (const std::string in = describe_non_finite(inputs[j]); !in.empty()) {
        cause = fmt::format("its input {} (shape {}) already held {}: the value came from outside the checked ops (a "
                            "parameter, a buffer or the data)", j, inputs[j].sizes(), in);
        break;
      }
    }
    QFLOW_FAIL("detect_anomaly: forward: op '{}'{} returned {} in output {} of shape {}; {}", op,
               where(current_anomaly_scope()), bad, i, out.sizes(), cause);
  }
}

void check_backward_outputs(const Node& node, const std::vector<Tensor>& grads) {
  for (size_t i = 0; i < grads.size(); ++i) {
    const std::string bad = describe_non_finite(grads[i]);
    if (bad.empty()) continue;
    const std::string& scope = node.anomaly_scope();
    QFLOW_FAIL("detect_anomaly: backward: '{}'{} returned {} in the gradient of its input {} (shape {}); the gradients it "
               "received were finite", node.name(), scope.empty() ? "" : " (of an op that ran in " + scope + ")", bad, i,
               grads[i].sizes());
  }
}

void check_root_gradient(size_t i, const Tensor& grad) {
  const std::string bad = describe_non_finite(grad);
  QFLOW_CHECK(bad.empty(), "detect_anomaly: backward: the gradient given for root {} holds {}", i, bad);
}

}  // namespace qflow::autograd::detail
