#include "qflow/quant/qconvbn.h"

#include <tuple>

#include "qflow/autograd/grad_mode.h"
#include "qflow/core/nn_ops.h"
#include "qflow/core/ops.h"
#include "float_counterpart.h"
#include "qflow/nn/functional.h"
#include "qflow/quant/deploy.h"

namespace qflow::quant {
namespace {

// (running_mean, 1/√(running_var + ε)); invstd in float64 like BatchNorm's eval kernel, then
// in the buffers' dtype.
std::pair<Tensor, Tensor> running_stats_of(const nn::BatchNorm2d& bn, double eps) {
  const Tensor invstd = bn.running_var.to(DType::Float64).add(Scalar(eps)).rsqrt().to(bn.running_var.dtype());
  return {bn.running_mean, invstd};
}

}  // namespace

QConvBN::QConvBN(nn::Conv2dOptions conv, nn::BatchNormOptions bn, QConfig qconfig)
    : QuantModule(qconfig), conv_options_(conv), bn_options_(bn) {
  if (bn_options_.features == 0) bn_options_.features = conv_options_.out;
  QFLOW_CHECK(bn_options_.features == conv_options_.out,
              "QConvBN: the BatchNorm has {} features but the convolution has {} output channels", bn_options_.features,
              conv_options_.out);
  QFLOW_CHECK(bn_options_.track_running_stats,
              "QConvBN: the BatchNorm must track running statistics (they are folded into the deployed weights)");
  reset();
}

// See QConv2d::reset.
void QConvBN::reset() {
  detail::register_float_parameters<nn::Conv2d>(*this, conv_options_, weight, bias);
  bn = register_module("bn", nn::BatchNorm2d(bn_options_));
  register_observers(*this, conv_options_.out);
}

std::shared_ptr<QConvBN> QConvBN::from_float(const nn::Conv2d& conv, const nn::BatchNorm2d& bn, const QConfig& qconfig) {
  QFLOW_CHECK(bn.options().features == conv.options().out,
              "QConvBN::from_float: the BatchNorm2d has {} features but the Conv2d has {} output channels",
              bn.options().features, conv.options().out);
  auto q = std::make_shared<QConvBN>(conv.options(), bn.options(), qconfig);
  detail::copy_float_layer(*q, conv, "QConvBN::from_float");
  q->bn->load_state_dict(bn.state_dict());
  return q;
}

std::pair<Tensor, Tensor> QConvBN::fold(const Tensor& mean, const Tensor& invstd) const {
  const Tensor k = bn->weight.defined() ? bn->weight * invstd : invstd;  // γ / √(var + ε)
  const Tensor w = weight * k.view({conv_options_.out, 1, 1, 1});
  const Tensor shifted = bias.defined() ? bias - mean : mean.neg();
  const Tensor b = bn->bias.defined() ? bn->bias + shifted * k : shifted * k;
  return {w, b};
}

std::pair<Tensor, Tensor> QConvBN::batch_stats(const Tensor& xq) {
  const auto& o = conv_options_;
  const Tensor y = F::conv2d(xq, weight, bias, o.stride.list(), o.padding, o.dilation.list(), o.groups);
  // The statistics and the running update of BatchNorm2d itself (same op, same momentum rule),
  // so the running buffers move exactly as they would behind a float Conv2d.
  double momentum = bn_options_.momentum.value_or(0.0);
  if (!bn_options_.momentum) momentum = 1.0 / static_cast<double>(bn->num_batches_tracked.item<int64_t>() + 1);
  auto [normalized, mean, invstd] =
      native_batch_norm(y, Tensor(), Tensor(), bn->running_mean, bn->running_var, true, momentum, bn_options_.eps);
  {
    NoGradGuard no_grad;
    bn->num_batches_tracked.add_(1);
  }
  return {mean, invstd};
}

Tensor QConvBN::forward_running_fold(const Tensor& xq) {
  const auto& o = conv_options_;
  const Tensor invstd = running_stats_of(*bn, bn_options_.eps).second;  // buffers: no gradient
  const Tensor k = bn->weight.defined() ? bn->weight * invstd : invstd;
  const Tensor scaled = weight * k.view({o.out, 1, 1, 1});
  Tensor y = F::conv2d(xq, quantize_weight(scaled), Tensor(), o.stride.list(), o.padding, o.dilation.list(), o.groups);
  y = y / k.view({1, o.out, 1, 1});
  if (bias.defined()) y = y + bias.view({1, o.out, 1, 1});
  // Batch statistics; BatchNorm2d moves its running statistics itself.
  return applies_relu_ ? bn->forward_relu(y) : (*bn)(y);
}

Tensor QConvBN::forward(const Tensor& x) {
  const auto& o = conv_options_;
  const Tensor xq = quantize_input(x);
  const bool batch_statistics = is_training() && !bn_frozen_;
  if (batch_statistics && qconfig().bn_fold == BnFold::Running) return forward_running_fold(xq);
  Tensor mean, invstd;
  if (batch_statistics) std::tie(mean, invstd) = batch_stats(xq);
  else std::tie(mean, invstd) = running_stats_of(*bn, bn_options_.eps);
  auto [w, b] = fold(mean, invstd);
  const Tensor y = F::conv2d(xq, quantize_weight(w), b, o.stride.list(), o.padding, o.dilation.list(), o.groups);
  return applies_relu_ ? relu(y) : y;
}

nn::ModulePtr QConvBN::fused_with_relu() const {
  if (applies_relu_) return nullptr;
  auto fused = std::make_shared<QConvBN>(*this);  // shallow: shares tensors, observers and bn
  fused->applies_relu_ = true;
  return fused;
}

std::pair<Tensor, Tensor> QConvBN::fold_running_stats() const {
  NoGradGuard no_grad;
  auto [mean, invstd] = running_stats_of(*bn, bn_options_.eps);
  auto [w, b] = fold(mean, invstd);
  return {w.detach(), b.detach()};
}

std::string QConvBN::extra_repr() const {
  std::string s = detail::conv_repr(conv_options_) + fmt::format(", eps={}, momentum={}", bn_options_.eps,
      bn_options_.momentum ? fmt::format("{}", *bn_options_.momentum) : "None");
  s += qconfig_repr();
  if (bn_frozen_) s += ", bn_frozen=True";
  if (applies_relu_) s += ", relu=True";
  return s;
}

// See QConv2d::deploy: the DConv2d holds the BN-folded weight, fake-quantized.
nn::ModulePtr QConvBN::deploy() const { return DConv2d::from_qconvbn(*this); }
Tensor QConvBN::quantized_weight() const { return DConv2d::from_qconvbn(*this)->float_weight(); }

}  // namespace qflow::quant
