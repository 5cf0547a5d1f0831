#pragma once
#include "qflow/nn/optim/optimizer.h"

namespace qflow::nn::optim {

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

/// torch.optim.SGD: g += wd·p; buf = momentum·buf + (1 − dampening)·g (buf = g at the first
/// step); g = nesterov ? g + momentum·buf : buf; p −= lr·g.
class SGD final : public detail::OptimizerImpl<SGDOptions> {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  /// Several groups; each group's options replace the defaults for its parameters.
  explicit SGD(std::vector<Group> groups);
  void step() override;

 protected:
  std::vector<BufferSpec> buffer_specs() const override { return {{"momentum_buffer", false}}; }
};

}  // namespace qflow::nn::optim
