#pragma once
#include "qflow/nn/optim/optimizer.h"

namespace qflow::nn::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

/// torch.optim.Adam (L2 weight decay added to the gradient) or, with `decoupled`, AdamW
/// (p *= 1 − lr·wd before the Adam update).
class Adam : public detail::OptimizerImpl<AdamOptions> {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options);
  explicit Adam(std::vector<Group> groups);
  void step() override;

 protected:
  std::vector<BufferSpec> buffer_specs() const override {
    return {{"exp_avg", false}, {"exp_avg_sq", false}, {"step", true}};
  }
  bool decoupled_weight_decay_ = false;
};

/// torch.optim.AdamW; PyTorch's default weight decay for AdamW is 1e-2.
class AdamW final : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamOptions options);
  explicit AdamW(std::vector<Group> groups);
};

}  // namespace qflow::nn::optim
