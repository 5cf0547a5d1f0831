// Derivatives of core/kernels/elementwise/activation.cpp: hardtanh, relu6, hardswish, leaky_relu, silu, each
// through its backward op on the saved input.
#include "qflow/autograd/derivatives.h"
#include "qflow/core/nn_ops.h"

namespace qflow::autograd {
namespace {

TensorList hardtanh_rule(const BackwardContext& ctx, const TensorList& g) {
  return {hardtanh_backward(g[0], ctx.input("self"), ctx.arg("min_val").to_double(), ctx.arg("max_val").to_double())};
}
// relu6 is hardtanh(0, 6), gradient included.
TensorList relu6_rule(const BackwardContext& ctx, const TensorList& g) {
  return {hardtanh_backward(g[0], ctx.input("self"), 0.0, 6.0)};
}
TensorList hardswish_rule(const BackwardContext& ctx, const TensorList& g) {
  return {hardswish_backward(g[0], ctx.input("self"))};
}
TensorList leaky_relu_rule(const BackwardContext& ctx, const TensorList& g) {
  return {leaky_relu_backward(g[0], ctx.input("self"), ctx.arg("negative_slope").to_double())};
}
TensorList silu_rule(const BackwardContext& ctx, const TensorList& g) {
  return {silu_backward(g[0], ctx.input("self"))};
}

}  // namespace

QFLOW_REGISTER_DERIVATIVES(activation) {
  registry.def("hardtanh", {.node_name = "HardtanhBackward", .save_inputs = kSaveAll, .backward = hardtanh_rule});
  registry.def("relu6", {.node_name = "HardtanhBackward", .save_inputs = kSaveAll, .backward = relu6_rule});
  registry.def("hardswish", {.node_name = "HardswishBackward", .save_inputs = kSaveAll, .backward = hardswish_rule});
  registry.def("leaky_relu", {.node_name = "LeakyReluBackward", .save_inputs = kSaveAll, .backward = leaky_relu_rule});
  registry.def("silu", {.node_name = "SiluBackward", .save_inputs = kSaveAll, .backward = silu_rule});
  registry.no_derivative({"hardtanh_backward", "hardswish_backward", "leaky_relu_backward", "silu_backward",
                          "threshold_backward"},
                         kNoDoubleBackward);
}

}  // namespace qflow::autograd
