// Derivative of the fake_quantize op (fake_quantize_kernel.cpp): the straight-through
// estimator. See Note [Quantization numerics] in fake_quantize.h.
#include "qflow/autograd/derivatives.h"
#include "qflow/quant/fake_quantize.h"

namespace qflow::quant {
namespace {

// Flat inputs: self (0), scale (1), zero_point (2). Arguments: ..., quant_min (3),
// quant_max (4), axis (5), clipped_ste (6). The pure estimator reads no saved tensor, so
// it never trips the version check on them; scale and zero_point are statistics and get
// no gradient (undefined), like the qparams of PyTorch's fake_quantize_per_*_affine.
TensorList fake_quantize_rule(const autograd::BackwardContext& ctx, const TensorList& g) {
  if (!ctx.arg(6).to_bool()) return {g[0], Tensor(), Tensor()};
  return {fake_quantize_backward(g[0], ctx.input(0), ctx.input(1), ctx.input(2), ctx.arg(3).to_int(),
                                 ctx.arg(4).to_int(), ctx.arg(5).to_int()),
          Tensor(), Tensor()};
}

}  // namespace
}  // namespace qflow::quant

QFLOW_REGISTER_DERIVATIVES(fake_quantize) {
  using namespace qflow::autograd;
  registry.def("fake_quantize", {.node_name = "FakeQuantizeBackward", .save_inputs = kSaveAll,
                                 .backward = qflow::quant::fake_quantize_rule});
}
