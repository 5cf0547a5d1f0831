// Optimizer updates as ops: sgd_update_ updates a list of parameters in one call, so a device
// backend can update them all in one launch (cuda/kernels/optim_ops.cpp) instead of four
// launches per parameter. The CPU kernel is the per-parameter sequence of ops SGD::step always
// ran, so CPU training is bit for bit what it was.
#include "kernels/common/kernel_utils.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"

namespace qflow {
namespace kernels {
namespace {

std::vector<TensorMeta> no_outputs(const OpArgs& a) {
  const TensorList& params = a.tensor_list("params");
  const TensorList& grads = a.tensor_list("grads");
  const TensorList& buffers = a.tensor_list("momentum_buffers");
  QFLOW_CHECK(grads.size() == params.size(), "sgd_update_: {} gradients for {} parameters", grads.size(), params.size());
  QFLOW_CHECK(buffers.empty() || buffers.size() == params.size(),
              "sgd_update_: {} momentum buffers for {} parameters (give one per parameter, or none without momentum)",
              buffers.size(), params.size());
  QFLOW_CHECK(a.to_double("momentum") == 0 || !buffers.empty(), "sgd_update_: momentum {} needs momentum buffers",
              a.to_double("momentum"));
  for (size_t i = 0; i < params.size(); ++i) {
    QFLOW_CHECK(grads[i].sizes() == params[i].sizes(), "sgd_update_: gradient {} has shape {}, its parameter {}", i,
                grads[i].sizes(), params[i].sizes());
    QFLOW_CHECK(buffers.empty() || buffers[i].sizes() == params[i].sizes(),
                "sgd_update_: momentum buffer {} has shape {}, its parameter {}", i, buffers[i].sizes(), params[i].sizes());
  }
  return {};
}

// torch.optim.SGD per parameter: g += wd·p; buf = g (first step) or momentum·buf + (1 − dampening)·g;
// g = g + momentum·buf (Nesterov) or buf; p −= lr·g.
Stack sgd_update_kernel(OpArgs& a) {
  no_outputs(a);
  const TensorList& params = a.tensor_list("params");
  const TensorList& grads = a.tensor_list("grads");
  const TensorList& buffers = a.tensor_list("momentum_buffers");
  const double lr = a.to_double("lr"), momentum = a.to_double("momentum"), dampening = a.to_double("dampening");
  const double weight_decay = a.to_double("weight_decay");
  const bool nesterov = a.to_bool("nesterov"), first_step = a.to_bool("first_step");
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor p = params[i];
    Tensor g = grads[i];
    if (weight_decay != 0) g = add(g, p, weight_decay);
    if (momentum != 0) {
      Tensor buf = buffers[i];
      if (first_step) {
        buf.copy_(g);
      } else {
        buf.mul_(momentum).add_(g, 1.0 - dampening);
      }
      g = nesterov ? add(g, buf, momentum) : buf;
    }
    p.add_(g, -lr);
  }
  return {};
}

}  // namespace
}  // namespace kernels

void sgd_update_(const TensorList& params, const TensorList& grads, const TensorList& momentum_buffers, double lr,
                 double momentum, double dampening, double weight_decay, bool nesterov, bool first_step) {
  QFLOW_OP_HANDLE("sgd_update_");
  call(op, {{"params", params},
            {"grads", grads},
            {"momentum_buffers", momentum_buffers},
            {"lr", lr},
            {"momentum", momentum},
            {"dampening", dampening},
            {"weight_decay", weight_decay},
            {"nesterov", nesterov},
            {"first_step", first_step}});
}

}  // namespace qflow

// The registration and typed functions of core/ops/optim.toml (Note [One declaration per op]).
#include "core/ops/optim.inc"
