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

/// A batch norm's parameters and buffers (undefined where the options have none).
struct BatchNormState {
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
};

/// New tensors for `options`: weight 1 and bias 0 (trainable) when affine; running mean 0,
/// variance 1 and count 0 when tracking statistics.
BatchNormState initial_batchnorm_state(const BatchNormOptions& options);
/// Registers `state`'s tensors themselves on `m` under PyTorch's names (weight, bias,
/// running_mean, running_var, num_batches_tracked), checking that the options' tensors are
/// there; returns the registered handles. Every batch-norm module (BatchNormBase,
/// distributed::SyncBatchNorm) registers through it, so their state_dicts are interchangeable.
BatchNormState register_batchnorm_state(Module& m, const BatchNormOptions& options, const BatchNormState& state);

/// Shared by BatchNorm1d, BatchNorm2d and BatchNormReLU2d: weight/bias (affine), running_mean/running_var and
/// num_batches_tracked buffers (in state_dict, as in PyTorch). Input ranks are checked
/// against [kMinDim, kMaxDim].
template <class Derived, int64_t kMinDim, int64_t kMaxDim>
class BatchNormBase : public Cloneable<Derived> {
 public:
  explicit BatchNormBase(BatchNormOptions options);
  void reset();
  Tensor forward(const Tensor& x) override;
  /// relu(forward(x)) in one op (batch_norm_relu, Note [Batch norm fused with ReLU]).
  Tensor forward_relu(const Tensor& x) { return normalize(x, true); }
  std::string extra_repr() const override;
  const BatchNormOptions& options() const { return options_; }

  Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 protected:
  /// Registers `shared`'s tensors themselves (not copies) as this module's parameters and
  /// buffers: a fused module taking over a batch norm (fx::fuse_activations).
  BatchNormBase(BatchNormOptions options, const BatchNormState& shared);
  /// forward's batch norm; with `relu` the fused batch_norm_relu.
  Tensor normalize(const Tensor& x, bool relu);

 private:
  void register_state(const BatchNormState& state);

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
  /// A BatchNormReLU2d sharing this module's tensors.
  ModulePtr fused_with_relu() const override;
};

/// relu(BatchNorm2d(x)) in one fused op (batch_norm_relu; PyTorch's intrinsic BNReLU2d), with
/// BatchNorm2d's parameters, buffers and state_dict keys. fx::fuse_activations puts one in
/// place of a BatchNorm2d followed by a ReLU.
class BatchNormReLU2d : public BatchNormBase<BatchNormReLU2d, 4, 4> {
 public:
  explicit BatchNormReLU2d(BatchNormOptions options) : BatchNormBase(options) {}
  /// Takes over `bn`'s parameters and buffers (shared: training one trains the other) and
  /// its train/eval mode.
  explicit BatchNormReLU2d(const BatchNorm2d& bn);
  Tensor forward(const Tensor& x) override { return forward_relu(x); }
};

}  // namespace qflow::nn
