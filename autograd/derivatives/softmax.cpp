// Derivatives of core/kernels/reduction/softmax.cpp: softmax and log_softmax differentiate through their
// saved output (what PyTorch does; no exp or log is recomputed).
#include "qflow/autograd/derivatives.h"
#include "qflow/core/nn_ops.h"

namespace qflow::autograd {
namespace {

TensorList softmax_rule(const BackwardContext& ctx, const TensorList& g) {
  return {softmax_backward(g[0], ctx.output(0), ctx.arg("dim").to_int())};
}
TensorList log_softmax_rule(const BackwardContext& ctx, const TensorList& g) {
  return {log_softmax_backward(g[0], ctx.output(0), ctx.arg("dim").to_int())};
}

}  // namespace

QFLOW_REGISTER_DERIVATIVES(softmax) {
  registry.def("softmax", {.node_name = "SoftmaxBackward", .save_outputs = true, .backward = softmax_rule});
  registry.def("log_softmax", {.node_name = "LogSoftmaxBackward", .save_outputs = true, .backward = log_softmax_rule});
  registry.no_derivative({"softmax_backward", "log_softmax_backward"}, kNoDoubleBackward);
}

}  // namespace qflow::autograd
