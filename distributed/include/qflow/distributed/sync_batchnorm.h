#pragma once
// SyncBatchNorm: batch normalization over the global batch of a data-parallel job.
//
// Note [SyncBatchNorm]
// Under DistributedDataParallel an ordinary BatchNorm normalizes each rank's share with that
// share's statistics (PyTorch's default too): fine when shares are large, noisy when a rank
// holds a few images. SyncBatchNorm computes the mean and variance of the whole global batch:
// the per-channel sums are allreduced (sum, then the sum of squared deviations from the
// global mean: two passes, as precise as the single-process layer), so training on N ranks ×
// B images equals one process × N·B images. The allreduce is itself differentiable — its
// backward allreduces the incoming gradient, since every rank's loss depends on every rank's
// inputs through the shared statistics — so backward needs no hand-written formula. The
// running statistics are updated from the global ones (unbiased variance over the global
// count), identical on every rank. Eval mode uses the running statistics, no communication.
// A world of one computes exactly what nn::BatchNorm computes.
#include <memory>

#include "qflow/distributed/process_group.h"
#include "qflow/fx/graph_module.h"
#include "qflow/nn/cloneable.h"
#include "qflow/nn/layers/batchnorm.h"

namespace qflow::distributed {

/// Σ over the ranks of `x`, differentiable (backward: Σ over the ranks of the gradient).
Tensor all_reduce_sum(const Tensor& x, ProcessGroup& group);

/// Over (N, C, ...) inputs of 2 to 5 dimensions; the parameters, buffers and state_dict keys
/// of nn::BatchNorm1d/2d, so checkpoints move between the two.
class SyncBatchNorm : public nn::Cloneable<SyncBatchNorm> {
 public:
  explicit SyncBatchNorm(nn::BatchNormOptions options, const ProcessGroup& group = ProcessGroup::world());
  /// Takes over `state`'s tensors themselves (shared), as convert_sync_batchnorm does.
  SyncBatchNorm(nn::BatchNormOptions options, const nn::BatchNormState& state, const ProcessGroup& group);
  void reset();
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const nn::BatchNormOptions& options() const { return options_; }

  Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  void register_state(const nn::BatchNormState& s);

  nn::BatchNormOptions options_;
  std::shared_ptr<ProcessGroup> group_;  // its own communicator, shared by clones
};

/// Replaces every nn::BatchNorm1d/BatchNorm2d of a traced model by a SyncBatchNorm sharing its
/// parameters, buffers and mode; returns how many were replaced. A traced model, because a
/// GraphModule calls its modules by path: a C++ model keeps calling the BatchNorm its typed
/// member (`std::shared_ptr<nn::BatchNorm2d> bn1`) points to, whatever the registry then holds.
/// Run it before fx::fuse_activations (a fused BatchNormReLU2d is no BatchNorm). The tensors
/// are the same, so an optimizer built on the model keeps working, and the untraced model
/// (its BatchNorms) saves and evaluates what the SyncBatchNorms trained.
int64_t convert_sync_batchnorm(fx::GraphModule& gm, const ProcessGroup& group = ProcessGroup::world());

}  // namespace qflow::distributed
