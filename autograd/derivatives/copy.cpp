// Derivatives of core/kernels/memory/copy.cpp: to, clone, contiguous (gradients pass through;
// `to` casts them back to the input's dtype), detach and item (no history by definition).
// copy_, fill_ and zero_ are differentiated by the autograd layer itself: see
// Note [In-place ops under autograd].
#include "qflow/autograd/derivatives.h"
#include "qflow/core/ops.h"

namespace qflow::autograd {
namespace {

TensorList identity_backward(const BackwardContext&, const TensorList& g) { return {g[0]}; }
TensorList to_backward(const BackwardContext& ctx, const TensorList& g) { return {g[0].to(ctx.input_dtype("self"))}; }
TensorList to_device_backward(const BackwardContext& ctx, const TensorList& g) {
  return {g[0].to(ctx.input_device("self"))};
}

}  // namespace

QFLOW_REGISTER_DERIVATIVES(copy) {
  registry.def("to", {.node_name = "ToCopyBackward", .backward = to_backward});
  registry.def("to_device", {.node_name = "ToDeviceBackward", .backward = to_device_backward});
  registry.def("clone", {.node_name = "CloneBackward", .backward = identity_backward});
  registry.def("contiguous", {.node_name = "ContiguousBackward", .backward = identity_backward});
  registry.non_differentiable({"detach"}, "its output is cut from the graph by definition");
  registry.non_differentiable({"item"}, "returns a Scalar, not a tensor");
}

}  // namespace qflow::autograd
