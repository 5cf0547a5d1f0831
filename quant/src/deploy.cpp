#include "qflow/quant/deploy.h"

#include "qflow/autograd/grad_mode.h"
#include "qflow/core/conv_ops.h"
#include "qflow/core/factory.h"
#include "qflow/quant/fake_quantize.h"
#include "qflow/nn/functional.h"

namespace qflow::quant {
namespace {

// The frozen qparams and weight of a trained Q module, in deployable form.
struct Baked {
  Tensor weight;  // fake-quantized (or the float weight when fake quantization is off)
  QParams input, weight_q;
};

// Identity qparams (scale 0) of `n` channels.
QParams identity_qparams(int64_t n) { return {zeros({n}), zeros({n}), 0}; }

Baked bake(const QuantModule& q, const Tensor& float_weight, int64_t out_channels, const char* who) {
  NoGradGuard no_grad;
  const int64_t weight_channels = q.qconfig().per_layer ? 1 : out_channels;
  if (!q.fake_quant_enabled()) {
    return {float_weight.detach().clone(), identity_qparams(1), identity_qparams(weight_channels)};
  }
  QFLOW_CHECK(q.input_observer->num_observations() > 0 && q.weight_observer->num_observations() > 0,
              "{}: the source module's observers have not recorded anything (input: {}, weight: {} observations); "
              "train or calibrate the quantization-aware model before deploying it",
              who, q.input_observer->num_observations(), q.weight_observer->num_observations());
  const QParams wq = q.weight_observer->calculate_qparams();
  return {fake_quantize(float_weight.detach(), wq, q.qconfig()), q.input_observer->calculate_qparams(), wq};
}

// Writes the baked values into a deployable module's tensors.
void store(const Baked& b, const Tensor& bias, Tensor& weight, Tensor& bias_dst, Tensor& input_scale,
           Tensor& input_zero_point, Tensor& weight_scale, Tensor& weight_zero_point, const char* who) {
  detail::copy_param(weight, b.weight, who);
  detail::copy_param(bias_dst, bias, who);
  detail::copy_param(input_scale, b.input.scale, who);
  detail::copy_param(input_zero_point, b.input.zero_point, who);
  detail::copy_param(weight_scale, b.weight_q.scale, who);
  detail::copy_param(weight_zero_point, b.weight_q.zero_point, who);
}

std::string deploy_repr(const QConfig& qc) {
  return fmt::format(", bits={}, scheme={}, formula={}, per_layer={}", qc.bits, to_string(qc.scheme),
                     to_string(qc.formula), qc.per_layer ? "True" : "False");
}

}  // namespace

// ---- DConv2d ---------------------------------------------------------------------------------------

DConv2d::DConv2d(nn::Conv2dOptions options, QConfig qconfig) : options_(options), qconfig_(qconfig) {
  qconfig_.validate();
  reset();
}

void DConv2d::reset() {
  const nn::Conv2d init(options_);
  weight = register_parameter("weight", init.weight.detach().clone());
  bias = options_.bias ? register_parameter("bias", init.bias.detach().clone()) : Tensor();
  const int64_t wc = qconfig_.per_layer ? 1 : options_.out;
  input_scale = register_buffer("input_scale", zeros({1}));
  input_zero_point = register_buffer("input_zero_point", zeros({1}));
  weight_scale = register_buffer("weight_scale", zeros({wc}));
  weight_zero_point = register_buffer("weight_zero_point", zeros({wc}));
}

std::shared_ptr<DConv2d> DConv2d::from_qconvbn(const QConvBN& qconvbn) {
  const char* who = "DConv2d::from_qconvbn";
  nn::Conv2dOptions opts = qconvbn.conv_options();
  opts.bias = true;  // the folded BN shift
  auto d = std::make_shared<DConv2d>(opts, qconvbn.qconfig());
  auto [w, b] = qconvbn.fold_running_stats();
  const Baked baked = bake(qconvbn, w, opts.out, who);
  store(baked, b, d->weight, d->bias, d->input_scale, d->input_zero_point, d->weight_scale, d->weight_zero_point, who);
  d->train(qconvbn.is_training());
  return d;
}

std::shared_ptr<DConv2d> DConv2d::from_qconv2d(const QConv2d& qconv) {
  const char* who = "DConv2d::from_qconv2d";
  auto d = std::make_shared<DConv2d>(qconv.options(), qconv.qconfig());
  const Baked baked = bake(qconv, qconv.weight, qconv.options().out, who);
  store(baked, qconv.bias, d->weight, d->bias, d->input_scale, d->input_zero_point, d->weight_scale,
        d->weight_zero_point, who);
  d->train(qconv.is_training());
  return d;
}

std::string DConv2d::integer_unsupported() const {
  if (qconfig_.bits > 8) return fmt::format("{} bits do not fit int8", qconfig_.bits);
  if (options_.padding.same) return "padding=\"same\"";
  if (to_vector<float>(input_scale)[0] <= 0.0f) return "the input scale is 0 (an empty or all-zero range)";
  for (float s : to_vector<float>(weight_scale))
    if (s <= 0.0f) return "a weight scale is 0 (an all-zero output channel)";
  for (float z : to_vector<float>(weight_zero_point))
    if (z != 0.0f) return "the weights have a zero point (affine weights)";
  return "";
}

void DConv2d::refresh_integer_weights() {
  // Version counters only grow, so their sum changes whenever one of the three tensors is written.
  const uint64_t version = weight.impl()->storage()->version() + input_scale.impl()->storage()->version() +
                           weight_scale.impl()->storage()->version();
  if (int8_weight_.defined() && version == int8_source_version_) return;
  NoGradGuard no_grad;
  const int64_t out = options_.out;
  const Tensor ws = weight_scale.numel() == 1 ? weight_scale.reshape({}) : weight_scale.view({out, 1, 1, 1});
  // weight holds (q - 0) * s_w exactly as fake_quantize rounded it: dividing gives q back.
  int8_weight_ = round(weight.detach() / ws).to(DType::Int8);
  output_scale_ = (weight_scale * input_scale).contiguous();
  int8_source_version_ = version;
}

Tensor DConv2d::forward(const Tensor& x) {
  const auto& o = options_;
  if (integer_ && integer_unsupported().empty()) {
    refresh_integer_weights();
    const bool affine = qconfig_.scheme == Scheme::Affine;
    const Tensor q = quantize(x, input_scale, input_zero_point, qconfig_.quant_min(), qconfig_.quant_max(), 0,
                              affine ? DType::UInt8 : DType::Int8);
    const int64_t zp = static_cast<int64_t>(to_vector<float>(input_zero_point)[0]);
    return quantized_conv2d(q, int8_weight_, output_scale_, bias, zp, o.stride.list(), {o.padding.h, o.padding.w},
                            o.dilation.list(), o.groups, applies_relu_);
  }
  const Tensor xq = fake_quantize(x, QParams{input_scale, input_zero_point, 0}, qconfig_);
  const Tensor y = F::conv2d(xq, weight, bias, o.stride.list(), o.padding, o.dilation.list(), o.groups);
  return applies_relu_ ? relu(y) : y;
}

nn::ModulePtr DConv2d::fused_with_relu() const {
  if (applies_relu_) return nullptr;
  auto fused = std::make_shared<DConv2d>(*this);  // shallow: shares weights, scales and the int8 copies
  fused->applies_relu_ = true;
  return fused;
}

std::string DConv2d::extra_repr() const {
  return detail::conv_repr(options_) + deploy_repr(qconfig_) + (integer_ ? ", integer=True" : "") +
         (applies_relu_ ? ", relu=True" : "");
}

// ---- DLinear ---------------------------------------------------------------------------------------

DLinear::DLinear(nn::LinearOptions options, QConfig qconfig) : options_(options), qconfig_(qconfig) {
  qconfig_.validate();
  reset();
}

void DLinear::reset() {
  const nn::Linear init(options_);
  weight = register_parameter("weight", init.weight.detach().clone());
  bias = options_.bias ? register_parameter("bias", init.bias.detach().clone()) : Tensor();
  const int64_t wc = qconfig_.per_layer ? 1 : options_.out;
  input_scale = register_buffer("input_scale", zeros({1}));
  input_zero_point = register_buffer("input_zero_point", zeros({1}));
  weight_scale = register_buffer("weight_scale", zeros({wc}));
  weight_zero_point = register_buffer("weight_zero_point", zeros({wc}));
}

std::shared_ptr<DLinear> DLinear::from_qlinear(const QLinear& qlinear) {
  const char* who = "DLinear::from_qlinear";
  auto d = std::make_shared<DLinear>(qlinear.options(), qlinear.qconfig());
  const Baked baked = bake(qlinear, qlinear.weight, qlinear.options().out, who);
  store(baked, qlinear.bias, d->weight, d->bias, d->input_scale, d->input_zero_point, d->weight_scale,
        d->weight_zero_point, who);
  d->train(qlinear.is_training());
  return d;
}

Tensor DLinear::forward(const Tensor& x) {
  const Tensor xq = fake_quantize(x, QParams{input_scale, input_zero_point, 0}, qconfig_);
  return F::linear(xq, weight, bias);
}

std::string DLinear::extra_repr() const {
  return fmt::format("in_features={}, out_features={}, bias={}", options_.in, options_.out,
                     options_.bias ? "True" : "False") +
         deploy_repr(qconfig_);
}

}  // namespace qflow::quant
