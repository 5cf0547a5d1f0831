#pragma once
#include <optional>

#include "qflow/nn/cloneable.h"

namespace qflow::nn {

struct BatchNormOptions {
  int64_t features = 0;
  double eps = 1e-5;
  /// PyTorch's convention: running = (1 − momentum)·running + momentum·batch. nullopt means a
  /// cumulative average (momentum = 1 / num_batches_tracked).
  std::optional<double> momentum = 0.1;
  bool affine = true;
  bool track_running_stats = true;
};

/// Shared by BatchNorm1d and BatchNorm2d: weight/bias (affine), running_mean/running_var and
/// num_batches_tracked buffers (in state_dict, as in PyTorch). Input ranks are checked
/// against [kMinDim, kMaxDim].
template <class Derived, int64_t kMinDim, int64_t kMaxDim>
class BatchNormBase : public Cloneable<Derived> {
 public:
  explicit BatchNormBase(BatchNormOptions options);
  void reset();
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const BatchNormOptions& options() const { return options_; }

  Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  BatchNormOptions options_;
};

/// Over (N, C) or (N, C, L) inputs.
class BatchNorm1d : public BatchNormBase<BatchNorm1d, 2, 3> {
 public:
  using BatchNormBase::BatchNormBase;
};

/// Over (N, C, H, W) inputs.
class BatchNorm2d : public BatchNormBase<BatchNorm2d, 4, 4> {
 public:
  using BatchNormBase::BatchNormBase;
};

}  // namespace qflow::nn
