// The derivative registry, saved tensors and BackwardContext accessors.
#include "qflow/autograd/derivatives.h"
#include "saved_tensor.h"

namespace qflow::autograd {

SavedTensor::SavedTensor(const Tensor& t, bool output) : is_output(output) {
  if (!t.defined()) return;
  // A detached alias: same storage and version counter (and opaque layout), no autograd meta.
  data = Tensor(t.impl()->alias());
  version = t.version();
}

const Tensor& SavedTensor::unpack(const std::string& node_name) const {
  QFLOW_CHECK(!released,
              "{}: trying to backward through the graph a second time (saved tensors were freed); pass "
              "retain_graph=true to the first backward if you need to",
              node_name);
  if (data.defined()) {
    QFLOW_CHECK(data.version() == version,
                "{}: one of the tensors needed for gradient computation has been modified by an in-place operation: "
                "the {} of shape {} is at version {}; expected version {} instead",
                node_name, is_output ? "output" : "input", data.sizes(), data.version(), version);
  }
  return data;
}

const Tensor& BackwardContext::input(size_t i) const {
  QFLOW_ASSERT(i < saved_inputs_.size() && saved_inputs_[i], "{}: input {} was not saved by its derivative rule", op_, i);
  if (!unpacked_inputs_[i].defined()) unpacked_inputs_[i] = saved_inputs_[i]->unpack(op_);
  return unpacked_inputs_[i];
}

const Tensor& BackwardContext::output(size_t i) const {
  QFLOW_ASSERT(i < saved_outputs_.size() && saved_outputs_[i], "{}: output {} was not saved by its derivative rule", op_, i);
  if (!unpacked_outputs_[i].defined()) unpacked_outputs_[i] = saved_outputs_[i]->unpack(op_);
  return unpacked_outputs_[i];
}

DerivativeRegistry& DerivativeRegistry::instance() {
  static DerivativeRegistry r;
  return r;
}

void DerivativeRegistry::def(std::string_view full_name, DerivativeRule rule) {
  QFLOW_CHECK(!rules_.count(std::string(full_name)), "derivative of '{}' is registered twice", full_name);
  QFLOW_CHECK(!rule.differentiable || rule.backward != nullptr, "derivative of '{}' has no backward function", full_name);
  rules_.emplace(std::string(full_name), std::move(rule));
}

void DerivativeRegistry::non_differentiable(std::initializer_list<std::string_view> names) {
  for (auto n : names) def(n, DerivativeRule{.node_name = std::string(n), .differentiable = false});
}

const DerivativeRule* DerivativeRegistry::find(std::string_view full_name) const {
  auto it = rules_.find(std::string(full_name));
  return it == rules_.end() ? nullptr : &it->second;
}

}  // namespace qflow::autograd
