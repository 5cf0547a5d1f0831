#include "qflow/nn/layers/batchnorm.h"

#include "qflow/autograd/grad_mode.h"
#include "qflow/core/factory.h"
#include "qflow/core/nn_ops.h"

namespace qflow::nn {

template <class D, int64_t kMin, int64_t kMax>
BatchNormBase<D, kMin, kMax>::BatchNormBase(BatchNormOptions options) : options_(options) {
  QFLOW_CHECK(options_.features > 0, "{}: num_features must be positive, got {}", this->type_name(), options_.features);
  reset();
}

template <class D, int64_t kMin, int64_t kMax>
BatchNormBase<D, kMin, kMax>::BatchNormBase(BatchNormOptions options, const BatchNormState& shared) : options_(options) {
  QFLOW_CHECK(options_.features > 0, "{}: num_features must be positive, got {}", this->type_name(), options_.features);
  register_state(shared);
}

BatchNormState initial_batchnorm_state(const BatchNormOptions& options) {
  const int64_t c = options.features;
  BatchNormState fresh;
  if (options.affine) {
    fresh.weight = ones({c}).requires_grad_();
    fresh.bias = zeros({c}).requires_grad_();
  }
  if (options.track_running_stats) fresh = {fresh.weight, fresh.bias, zeros({c}), ones({c}), zeros({}, DType::Int64)};
  return fresh;
}

BatchNormState register_batchnorm_state(Module& m, const BatchNormOptions& options, const BatchNormState& s) {
  BatchNormState out;
  if (options.affine) {
    QFLOW_CHECK(s.weight.defined() && s.bias.defined(), "{}: affine=True needs a weight and a bias", m.type_name());
    out.weight = m.register_parameter("weight", s.weight, s.weight.requires_grad());
    out.bias = m.register_parameter("bias", s.bias, s.bias.requires_grad());
  }
  if (options.track_running_stats) {
    QFLOW_CHECK(s.running_mean.defined() && s.running_var.defined() && s.num_batches_tracked.defined(),
                "{}: track_running_stats=True needs running_mean, running_var and num_batches_tracked", m.type_name());
    out.running_mean = m.register_buffer("running_mean", s.running_mean);
    out.running_var = m.register_buffer("running_var", s.running_var);
    out.num_batches_tracked = m.register_buffer("num_batches_tracked", s.num_batches_tracked);
  }
  return out;
}

template <class D, int64_t kMin, int64_t kMax>
void BatchNormBase<D, kMin, kMax>::reset() {
  register_state(initial_batchnorm_state(options_));
}

template <class D, int64_t kMin, int64_t kMax>
void BatchNormBase<D, kMin, kMax>::register_state(const BatchNormState& s) {
  const BatchNormState r = register_batchnorm_state(*this, options_, s);
  weight = r.weight, bias = r.bias, running_mean = r.running_mean, running_var = r.running_var;
  num_batches_tracked = r.num_batches_tracked;
}

template <class D, int64_t kMin, int64_t kMax>
Tensor BatchNormBase<D, kMin, kMax>::forward(const Tensor& x) {
  return normalize(x, false);
}

template <class D, int64_t kMin, int64_t kMax>
Tensor BatchNormBase<D, kMin, kMax>::normalize(const Tensor& x, bool relu) {
  QFLOW_CHECK(x.dim() >= kMin && x.dim() <= kMax, "{}: expected {}-d input{}, got shape {}", this->type_name(), kMin,
              kMin == kMax ? "" : fmt::format(" or {}-d input", kMax), x.sizes());
  QFLOW_CHECK(x.sizes()[1] == options_.features, "{}: expected {} channels, got input of shape {}", this->type_name(),
              options_.features, x.sizes());
  const bool training = this->is_training();
  const bool update_stats = training && options_.track_running_stats;
  double momentum = options_.momentum.value_or(0.0);
  // momentum None is PyTorch's cumulative average: the batch counted by this call weighs 1/n.
  if (update_stats && !options_.momentum)
    momentum = 1.0 / static_cast<double>(num_batches_tracked.template item<int64_t>() + 1);
  // Eval without tracked statistics normalizes with the batch's own (and updates nothing).
  const bool use_batch_stats = training || !options_.track_running_stats;
  const Tensor rm = use_batch_stats && !training ? Tensor() : running_mean;
  const Tensor rv = use_batch_stats && !training ? Tensor() : running_var;
  Tensor out = relu ? batch_norm_relu(x, weight, bias, rm, rv, use_batch_stats, momentum, options_.eps)
                    : batch_norm(x, weight, bias, rm, rv, use_batch_stats, momentum, options_.eps);
  if (update_stats) {  // counted only once the batch was accepted, so a refused input changes nothing
    NoGradGuard no_grad;
    num_batches_tracked.add_(1);
  }
  return out;
}

template <class D, int64_t kMin, int64_t kMax>
std::string BatchNormBase<D, kMin, kMax>::extra_repr() const {
  return fmt::format("{}, eps={}, momentum={}, affine={}, track_running_stats={}", options_.features, options_.eps,
                     options_.momentum ? fmt::format("{}", *options_.momentum) : "None", options_.affine ? "True" : "False",
                     options_.track_running_stats ? "True" : "False");
}

template class BatchNormBase<BatchNorm1d, 2, 3>;
template class BatchNormBase<BatchNorm2d, 4, 4>;
template class BatchNormBase<BatchNormReLU2d, 4, 4>;

ModulePtr BatchNorm2d::fused_with_relu() const { return std::make_shared<BatchNormReLU2d>(*this); }

BatchNormReLU2d::BatchNormReLU2d(const BatchNorm2d& bn)
    : BatchNormBase(bn.options(), {bn.weight, bn.bias, bn.running_mean, bn.running_var, bn.num_batches_tracked}) {
  train(bn.is_training());
}

}  // namespace qflow::nn
