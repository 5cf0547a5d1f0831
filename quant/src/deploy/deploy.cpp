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
  Tensor weight;  // the grid integers, or the float weight when no grid reproduces it
  QParams input, weight_q;
  WeightStorage storage() const { return weight.is_floating_point() ? WeightStorage::Float : WeightStorage::Integers; }
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
  // The weight the QAT model computes with, kept as its integers (Note [Deployed module layout]).
  const Tensor fake_quantized = fake_quantize(float_weight.detach(), wq, q.qconfig());
  detail::GridIntegers grid = detail::grid_integers(fake_quantized, wq.scale, wq.zero_point, q.qconfig());
  return {grid.integers.defined() ? std::move(grid.integers) : fake_quantized, q.input_observer->calculate_qparams(),
          wq};
}

// Writes the baked values into a deployable module's tensors.
void store(const Baked& b, const Tensor& bias, Tensor& weight, Tensor& bias_dst, Tensor& input_scale,
           Tensor& input_zero_point, Tensor& weight_scale, Tensor& weight_zero_point, const char* who) {
  QFLOW_ASSERT(weight.dtype() == b.weight.dtype(), "{}: the module stores {} weights, the baked ones are {}", who,
               weight.dtype(), b.weight.dtype());
  detail::copy_param(weight, b.weight, who);
  detail::copy_param(bias_dst, bias, who);
  detail::copy_param(input_scale, b.input.scale, who);
  detail::copy_param(input_zero_point, b.input.zero_point, who);
  detail::copy_param(weight_scale, b.weight_q.scale, who);
  detail::copy_param(weight_zero_point, b.weight_q.zero_point, who);
}

// A deployed layer's weight as constructed: zeros of its grid's integer type, or the float
// layer's initial weight.
Tensor initial_weight(const Tensor& float_init, WeightStorage storage, const QConfig& qc) {
  if (storage == WeightStorage::Float) return float_init.detach().clone();
  return zeros(float_init.sizes(), detail::weight_integer_type(qc));
}

// Integers cannot require gradients; a float weight is a parameter as in the float layer.
bool weight_requires_grad(WeightStorage storage) { return storage == WeightStorage::Float; }

// The reset() of DConv2d and DLinear: weight and bias as the float layer `Float` initialises
// them (integer weights zero), every qparam 0 ("not quantized") until a factory fills them.
template <typename Float, typename D, typename Options>
void reset_deployed(D& d, const Options& o, const QConfig& qc, WeightStorage storage) {
  const Float init(o);
  d.weight = d.register_parameter("weight", initial_weight(init.weight, storage, qc), weight_requires_grad(storage));
  d.bias = o.bias ? d.register_parameter("bias", init.bias.detach().clone()) : Tensor();
  const int64_t wc = qc.per_layer ? 1 : o.out;
  d.input_scale = d.register_buffer("input_scale", zeros({1}));
  d.input_zero_point = d.register_buffer("input_zero_point", zeros({1}));
  d.weight_scale = d.register_buffer("weight_scale", zeros({wc}));
  d.weight_zero_point = d.register_buffer("weight_zero_point", zeros({wc}));
}

// The factories of DConv2d and DLinear: a deployed layer of `o` holding the trained Q module's
// weight `w` (baked onto its grid) and bias `b`, in `q`'s training mode.
template <typename D, typename Q, typename Options>
std::shared_ptr<D> deploy_layer(const Q& q, const Options& o, const Tensor& w, const Tensor& b, const char* who) {
  const Baked baked = bake(q, w, o.out, who);
  auto d = std::make_shared<D>(o, q.qconfig(), baked.storage());
  store(baked, b, d->weight, d->bias, d->input_scale, d->input_zero_point, d->weight_scale, d->weight_zero_point, who);
  d->train(q.is_training());
  return d;
}

bool is_integer(const Tensor& x) { return x.dtype() == DType::UInt8 || x.dtype() == DType::Int8; }

// The quantized input of an integer layer: x itself when the previous layer wrote it
// (Note [Integer activations]), else quantize(x) with the frozen input qparams.
Tensor integer_input(const Tensor& x, const detail::DeployedTensors& t, const QConfig& qc, const char* who) {
  const DType type = detail::input_integer_type(qc);
  if (is_integer(x)) {
    QFLOW_CHECK(x.dtype() == type, "{}: got a {} input, but its input grid ({}) is {}", who, x.dtype(),
                to_string(qc.scheme), type);
    return x;
  }
  return quantize(x, t.input_scale, t.input_zero_point, qc.quant_min(), qc.quant_max(), 0, type);
}

// The float simulation's input: fake_quantize(x), or the value of integers a previous layer
// wrote, (q - z) * s — the same number.
Tensor simulated_input(const Tensor& x, const detail::DeployedTensors& t, const QConfig& qc) {
  if (is_integer(x)) return (x.to(DType::Float32) - t.input_zero_point) * t.input_scale;
  return fake_quantize(x, QParams{t.input_scale, t.input_zero_point, 0}, qc);
}

std::string integer_repr(bool integer, const std::string& unsupported) {
  if (!integer) return ", integer=False";
  return unsupported.empty() ? ", integer=True" : fmt::format(", integer=False ({})", unsupported);
}

std::string deploy_repr(const QConfig& qc) {
  return fmt::format(", bits={}{}, scheme={}, formula={}, per_layer={}", qc.bits,
                     qc.activation_bits ? fmt::format(", activation_bits={}", *qc.activation_bits) : "",
                     to_string(qc.scheme), to_string(qc.formula), qc.per_layer ? "True" : "False");
}

}  // namespace

// ---- DConv2d ---------------------------------------------------------------------------------------

DConv2d::DConv2d(nn::Conv2dOptions options, QConfig qconfig, WeightStorage storage)
    : options_(options), qconfig_(qconfig), storage_(storage) {
  qconfig_.validate();
  reset();
}

void DConv2d::reset() { reset_deployed<nn::Conv2d>(*this, options_, qconfig_, storage_); }

std::shared_ptr<DConv2d> DConv2d::from_qconvbn(const QConvBN& qconvbn) {
  nn::Conv2dOptions opts = qconvbn.conv_options();
  opts.bias = true;  // the folded BN shift
  auto [w, b] = qconvbn.fold_running_stats();
  return deploy_layer<DConv2d>(qconvbn, opts, w, b, "DConv2d::from_qconvbn");
}

std::shared_ptr<DConv2d> DConv2d::from_qconv2d(const QConv2d& qconv) {
  return deploy_layer<DConv2d>(qconv, qconv.options(), qconv.weight, qconv.bias, "DConv2d::from_qconv2d");
}

const Tensor& DConv2d::float_weight() const {
  return detail::cached_float_weight(float_weight_, weight, weight_scale, weight_zero_point);
}

detail::DeployedTensors DConv2d::tensors() const {
  return {weight, bias, input_scale, input_zero_point, weight_scale, weight_zero_point};
}

std::string DConv2d::integer_unsupported() const {
  if (options_.padding.same) return "padding=\"same\"";
  return detail::integer_unsupported(tensors(), qconfig_);
}

Tensor DConv2d::forward(const Tensor& x) { return run(x, Tensor()); }

TensorList DConv2d::forward_list(const TensorList& inputs) {
  QFLOW_CHECK(inputs.size() == 1 || inputs.size() == 2,
              "DConv2d: expected an input and optionally a residual to add, got {} tensors", inputs.size());
  return {run(inputs[0], inputs.size() == 2 ? inputs[1] : Tensor())};
}

Tensor DConv2d::run(const Tensor& x, const Tensor& residual) {
  const auto& o = options_;
  if (integer_) {
    const auto& f = detail::cached_integer_form(integer_form_, tensors(), qconfig_, output_grid_,
                                                o.padding.same ? "padding=\"same\"" : "");
    if (f.unsupported.empty()) {
      const Tensor q = integer_input(x, tensors(), qconfig_.activations(), "DConv2d");
      if (residual.defined() && residual_in_place_) {
        Tensor sum = residual;  // the residual's storage becomes the output
        return quantized_conv2d_add_(sum, q, f.weight, f.output_scale, f.bias, f.input_zero_point, o.stride.list(),
                                     {o.padding.h, o.padding.w}, o.dilation.list(), o.groups, applies_relu_);
      }
      return quantized_conv2d(q, f.weight, f.output_scale, f.bias, f.input_zero_point, o.stride.list(),
                              {o.padding.h, o.padding.w}, o.dilation.list(), o.groups, applies_relu_, residual,
                              f.output);
    }
  }
  Tensor y = F::conv2d(simulated_input(x, tensors(), qconfig_.activations()), float_weight(), bias, o.stride.list(), o.padding,
                       o.dilation.list(), o.groups);
  if (residual.defined()) y = add(y, residual);
  return applies_relu_ ? relu(y) : y;
}

nn::ModulePtr DConv2d::fused_with_relu() const {
  if (applies_relu_) return nullptr;
  auto fused = std::make_shared<DConv2d>(*this);  // shallow: shares weights and scales
  fused->applies_relu_ = true;
  return fused;
}

std::string DConv2d::extra_repr() const {
  std::string grid;
  if (output_grid_) grid = fmt::format(", output={}", detail::input_integer_type(output_grid_->qconfig));
  return detail::conv_repr(options_) + deploy_repr(qconfig_) + integer_repr(integer_, integer_unsupported()) + grid +
         (residual_in_place_ ? ", residual_in_place=True" : "") + (applies_relu_ ? ", relu=True" : "");
}

// ---- DLinear ---------------------------------------------------------------------------------------

DLinear::DLinear(nn::LinearOptions options, QConfig qconfig, WeightStorage storage)
    : options_(options), qconfig_(qconfig), storage_(storage) {
  qconfig_.validate();
  reset();
}

void DLinear::reset() { reset_deployed<nn::Linear>(*this, options_, qconfig_, storage_); }

std::shared_ptr<DLinear> DLinear::from_qlinear(const QLinear& qlinear) {
  return deploy_layer<DLinear>(qlinear, qlinear.options(), qlinear.weight, qlinear.bias, "DLinear::from_qlinear");
}

const Tensor& DLinear::float_weight() const {
  return detail::cached_float_weight(float_weight_, weight, weight_scale, weight_zero_point);
}

detail::DeployedTensors DLinear::tensors() const {
  return {weight, bias, input_scale, input_zero_point, weight_scale, weight_zero_point};
}

std::string DLinear::integer_unsupported() const { return detail::integer_unsupported(tensors(), qconfig_); }

Tensor DLinear::forward(const Tensor& x) {
  if (integer_) {
    const auto& f = detail::cached_integer_form(integer_form_, tensors(), qconfig_, std::nullopt, "");
    if (f.unsupported.empty()) {
      // A linear layer is a 1×1 convolution of (rows, in, 1, 1): the same integer kernel.
      QFLOW_CHECK(x.dim() >= 1 && x.size(-1) == options_.in,
                  "DLinear: expected an input whose last dimension is in_features={}, got shape {}", options_.in,
                  x.sizes());
      SymIntList out_sizes = x.sym_sizes();
      out_sizes.back() = options_.out;
      const Tensor q = integer_input(x, tensors(), qconfig_.activations(), "DLinear").reshape({-1, options_.in, 1, 1});
      return quantized_conv2d(q, f.weight.view({options_.out, options_.in, 1, 1}), f.output_scale, f.bias,
                              f.input_zero_point)
          .reshape(out_sizes);
    }
  }
  return F::linear(simulated_input(x, tensors(), qconfig_.activations()), float_weight(), bias);
}

std::string DLinear::extra_repr() const {
  return fmt::format("in_features={}, out_features={}, bias={}", options_.in, options_.out,
                     options_.bias ? "True" : "False") +
         deploy_repr(qconfig_) + integer_repr(integer_, integer_unsupported());
}

size_t set_integer(nn::Module& model, bool on) {
  size_t n = 0;
  for (const auto& [path, m] : model.named_modules())
    if (auto* d = dynamic_cast<DeployedModule*>(m.get())) d->set_integer(on), ++n;
  return n;
}

std::vector<std::string> float_layers(nn::Module& model) {
  std::vector<std::string> out;
  const auto note = [&out](const std::string& path, bool integer, const std::string& why) {
    if (!integer) out.push_back(path + ": integer=False");
    else if (!why.empty()) out.push_back(path + ": " + why);
  };
  for (const auto& [path, m] : model.named_modules()) {
    if (const auto* d = dynamic_cast<const DeployedModule*>(m.get())) note(path, d->integer(), d->integer_unsupported());
  }
  return out;
}

}  // namespace qflow::quant
