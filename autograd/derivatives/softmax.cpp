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

}  // namespace qflow::autograd

#include "autograd/derivatives/softmax.derivatives.inc"
