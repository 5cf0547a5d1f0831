#include "qflow/nn/step_graph.h"

#include "qflow/core/error.h"
#include "qflow/core/factory.h"

namespace qflow::nn {

namespace {

std::string describe(const std::vector<Tensor>& tensors) {
  std::string s;
  for (const Tensor& t : tensors) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", t.sizes(), t.dtype());
  return "(" + s + ")";
}

}  // namespace

StepGraph::StepGraph(Device device, Function function, Options options)
    : device_(device), function_(std::move(function)), options_(options) {
  QFLOW_CHECK(!device.is_cpu(),
              "StepGraph: the cpu cannot capture graphs (Note [Captured device work]); call the step itself there");
  QFLOW_CHECK(options.warmup >= 0, "StepGraph: warmup must be >= 0, got {}", options.warmup);
  QFLOW_CHECK(function_ != nullptr, "StepGraph: no function");
}

bool StepGraph::matches(const std::vector<Tensor>& inputs) const {
  if (!graph_) return true;
  if (inputs.size() != inputs_.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].sizes() != inputs_[i].sizes() || inputs[i].dtype() != inputs_[i].dtype()) return false;
  return true;
}

void StepGraph::reset() {
  graph_.reset();
  outputs_.clear();
  inputs_.clear();
}

std::vector<Tensor> StepGraph::operator()(const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs) QFLOW_CHECK(t.defined(), "StepGraph: an input is undefined");
  if (calls_ < options_.warmup) {
    ++calls_;
    std::vector<Tensor> on_device;
    for (const Tensor& t : inputs) on_device.push_back(t.device() == device_ ? t : t.to(device_));
    return function_(on_device);
  }
  if (!graph_) {
    std::vector<Tensor> fixed;
    for (const Tensor& t : inputs) {
      Tensor in = empty(t.sizes(), t.dtype(), device_);
      in.copy_(t);
      fixed.push_back(in);
    }
    std::vector<Tensor> outputs;
    graph_ = capture_graph(device_, [&] { outputs = function_(fixed); });
    inputs_ = std::move(fixed);
    outputs_ = std::move(outputs);
  } else {
    QFLOW_CHECK(matches(inputs), "StepGraph: the graph was captured for inputs {}, got {}; run a step of another "
                "shape uncaptured (or reset() and capture again)", describe(inputs_), describe(inputs));
    for (size_t i = 0; i < inputs.size(); ++i) inputs_[i].copy_(inputs[i]);
  }
  graph_->replay();
  ++replays_;
  return outputs_;
}

}  // namespace qflow::nn
