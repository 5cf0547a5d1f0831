#pragma once
#include "qflow/nn/cloneable.h"

namespace qflow::nn {

struct LinearOptions {
  int64_t in = 0;
  int64_t out = 0;
  bool bias = true;
};

/// torch.nn.Linear: y = x·Wᵀ + b, W (out, in); PyTorch's default initialisation.
class Linear : public Cloneable<Linear> {
 public:
  explicit Linear(LinearOptions options);
  void reset();
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const LinearOptions& options() const { return options_; }

  Tensor weight;
  Tensor bias;

 private:
  LinearOptions options_;
};

}  // namespace qflow::nn
