// See Note [SyncBatchNorm].
#include "qflow/distributed/sync_batchnorm.h"

#include "qflow/autograd/autograd_meta.h"
#include "qflow/autograd/grad_mode.h"
#include "qflow/core/factory.h"
#include "qflow/core/nn_ops.h"
#include "qflow/core/ops.h"
#include "qflow/fx/trace.h"

namespace qflow::distributed {
namespace {

class AllReduceSumBackward final : public autograd::Node {
 public:
  AllReduceSumBackward(ProcessGroup& group, TensorMeta meta) : group_(group), meta_(std::move(meta)) {}
  std::string name() const override { return "AllReduceSumBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = grads.at(0).contiguous().clone();
    group_.all_reduce(g, ReduceOp::Sum, "SyncBatchNorm backward allreduce");
    return {g};
  }
  TensorMeta output_meta(size_t) const override { return meta_; }

 private:
  ProcessGroup& group_;  // owned by the SyncBatchNorm whose forward made this node
  TensorMeta meta_;
};

// SyncBatchNorm is a leaf for fx tracing (its forward communicates).
struct RegisterLeaf {
  RegisterLeaf() { fx::register_leaf_type<SyncBatchNorm>(); }
} g_register_leaf;

}  // namespace

Tensor all_reduce_sum(const Tensor& x, ProcessGroup& group) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = x.contiguous().clone();
  }
  group.all_reduce(out, ReduceOp::Sum, "SyncBatchNorm forward allreduce");
  if (autograd::GradMode::is_enabled() && x.requires_grad()) {
    auto node = std::make_shared<AllReduceSumBackward>(group, TensorMeta{x.sizes(), x.dtype()});
    node->mutable_next_edges().push_back(autograd::gradient_edge(x));
    autograd::set_history(out, std::move(node), 0);
  }
  return out;
}

SyncBatchNorm::SyncBatchNorm(nn::BatchNormOptions options, const ProcessGroup& group)
    : options_(options), group_(std::make_shared<ProcessGroup>(group.duplicate())) {
  QFLOW_CHECK(options_.features > 0, "SyncBatchNorm: num_features must be positive, got {}", options_.features);
  reset();
}

SyncBatchNorm::SyncBatchNorm(nn::BatchNormOptions options, const nn::BatchNormState& state, const ProcessGroup& group)
    : options_(options), group_(std::make_shared<ProcessGroup>(group.duplicate())) {
  QFLOW_CHECK(options_.features > 0, "SyncBatchNorm: num_features must be positive, got {}", options_.features);
  register_state(state);
}

void SyncBatchNorm::reset() { register_state(nn::initial_batchnorm_state(options_)); }

void SyncBatchNorm::register_state(const nn::BatchNormState& s) {
  const nn::BatchNormState r = nn::register_batchnorm_state(*this, options_, s);
  weight = r.weight, bias = r.bias, running_mean = r.running_mean, running_var = r.running_var;
  num_batches_tracked = r.num_batches_tracked;
}

Tensor SyncBatchNorm::forward(const Tensor& x) {
  QFLOW_CHECK(x.dim() >= 2 && x.dim() <= 5, "SyncBatchNorm: expected a 2-d to 5-d input (N, C, ...), got shape {}",
              x.sizes());
  const int64_t c = options_.features;
  QFLOW_CHECK(x.sizes()[1] == c, "SyncBatchNorm: expected {} channels, got input of shape {}", c, x.sizes());
  SymIntList shape(static_cast<size_t>(x.dim()), SymInt(1));
  shape[1] = SymInt(c);
  const bool use_batch_stats = is_training() || !options_.track_running_stats;
  if (!use_batch_stats) return batch_norm(x, weight, bias, running_mean, running_var, false, 0.0, options_.eps);

  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != 1) dims.push_back(d);
  const int64_t count = group_->sum(x.numel() / c, "SyncBatchNorm element count");
  QFLOW_CHECK(count > 1, "SyncBatchNorm: expected more than 1 value per channel over all ranks in training, got input of "
                         "shape {} ({} value(s) per channel in all)", x.sizes(), count);
  const double n = static_cast<double>(count);
  const Tensor mean = all_reduce_sum(x.sum(dims), *group_).div(n);
  const Tensor centred = x.sub(mean.reshape(shape));
  const Tensor var = all_reduce_sum(centred.mul(centred).sum(dims), *group_).div(n);
  Tensor y = centred.mul(var.add(options_.eps).rsqrt().reshape(shape));
  if (options_.affine) y = y.mul(weight.reshape(shape)).add(bias.reshape(shape));

  if (is_training() && options_.track_running_stats) {
    NoGradGuard no_grad;
    double momentum = options_.momentum.value_or(0.0);
    if (!options_.momentum) momentum = 1.0 / static_cast<double>(num_batches_tracked.item<int64_t>() + 1);
    Tensor rm = running_mean, rv = running_var, nbt = num_batches_tracked;
    rm.mul_(1.0 - momentum).add_(mean.detach().mul(momentum));
    rv.mul_(1.0 - momentum).add_(var.detach().mul(momentum * n / (n - 1.0)));
    nbt.add_(1);
  }
  return y;
}

std::string SyncBatchNorm::extra_repr() const {
  return fmt::format("{}, eps={}, momentum={}, affine={}, track_running_stats={}, {}", options_.features, options_.eps,
                     options_.momentum ? fmt::format("{}", *options_.momentum) : "None", options_.affine ? "True" : "False",
                     options_.track_running_stats ? "True" : "False", group_->describe());
}

int64_t convert_sync_batchnorm(fx::GraphModule& gm, const ProcessGroup& group) {
  int64_t replaced = 0;
  for (const nn::ModulePtr& m : gm.modules()) {
    for (const auto& [name, child] : m->named_children()) {
      const nn::BatchNormOptions* options = nullptr;
      nn::BatchNormState state;
      if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(child.get())) {
        options = &bn->options();
        state = {bn->weight, bn->bias, bn->running_mean, bn->running_var, bn->num_batches_tracked};
      } else if (auto* bn1 = dynamic_cast<nn::BatchNorm1d*>(child.get())) {
        options = &bn1->options();
        state = {bn1->weight, bn1->bias, bn1->running_mean, bn1->running_var, bn1->num_batches_tracked};
      }
      if (options == nullptr) continue;
      auto sync = std::make_shared<SyncBatchNorm>(*options, state, group);
      sync->train(child->is_training());
      m->replace_module(name, sync);
      ++replaced;
    }
  }
  return replaced;
}

}  // namespace qflow::distributed
