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

}  // namespace qflow::autograd

#include "autograd/derivatives/copy.derivatives.inc"
