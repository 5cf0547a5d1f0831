#include "qflow/quant/quant_module.h"

#include "qflow/autograd/grad_mode.h"

namespace qflow::quant {

QuantModule::QuantModule(const QConfig& qconfig) : qconfig_(qconfig) { qconfig_.validate(); }

namespace {

// Registers `observer` as `name` on `self` and returns the registered one (while cloning, the
// clone of the source's, Note [Module cloning]).
std::shared_ptr<Observer> register_observer(nn::Module& self, const char* name, const std::shared_ptr<Observer>& observer) {
  const nn::ModulePtr registered = self.register_module(name, std::dynamic_pointer_cast<nn::Module>(observer));
  auto obs = std::dynamic_pointer_cast<Observer>(registered);
  QFLOW_ASSERT(obs != nullptr, "{} is a {}, not an observer", name, registered->type_name());
  return obs;
}

}  // namespace

void QuantModule::register_observers(nn::Module& self, int64_t out_channels) {
  input_observer = register_observer(self, "input_observer", make_input_observer(qconfig_.activations()));
  weight_observer =
      register_observer(self, "weight_observer", make_weight_observer(qconfig_, qconfig_.per_layer ? 0 : out_channels));
}

Tensor QuantModule::quantize_input(const Tensor& x) {
  input_observer->module()(x);
  return fake_quant_ ? input_observer->fake_quantize(x) : x;
}

Tensor QuantModule::quantize_weight(const Tensor& w) {
  weight_observer->module()(w);
  return fake_quant_ ? weight_observer->fake_quantize(w) : w;
}

std::string QuantModule::qconfig_repr() const {
  return fmt::format(", bits={}{}, scheme={}, formula={}, per_layer={}{}", qconfig_.bits,
                     qconfig_.activation_bits ? fmt::format(", activation_bits={}", *qconfig_.activation_bits) : "",
                     to_string(qconfig_.scheme), to_string(qconfig_.formula), qconfig_.per_layer ? "True" : "False",
                     fake_quant_ ? "" : ", fake_quant=False");
}

int64_t enable_fake_quant(nn::Module& root, bool on) {
  int64_t count = 0;
  for (const nn::ModulePtr& m : root.modules()) {
    if (auto* q = dynamic_cast<QuantModule*>(m.get())) {
      q->enable_fake_quant(on);
      ++count;
    }
  }
  return count;
}

namespace detail {

std::string conv_repr(const nn::Conv2dOptions& o) {
  std::string s = fmt::format("{}, {}, kernel_size=({}, {}), stride=({}, {})", o.in, o.out, o.kernel.h, o.kernel.w,
                              o.stride.h, o.stride.w);
  if (o.padding.same) s += ", padding=same";
  else if (o.padding.valid) s += ", padding=valid";
  else if (o.padding.h != 0 || o.padding.w != 0) s += fmt::format(", padding=({}, {})", o.padding.h, o.padding.w);
  if (!(o.dilation == nn::Size2(1))) s += fmt::format(", dilation=({}, {})", o.dilation.h, o.dilation.w);
  if (o.groups != 1) s += fmt::format(", groups={}", o.groups);
  if (!o.bias) s += ", bias=False";
  return s;
}

void copy_param(Tensor& dst, const Tensor& src, const char* what) {
  QFLOW_CHECK(src.defined() == dst.defined(), "{}: the float module {} a {} but the quantized one {}", what,
              src.defined() ? "has" : "has no", what, dst.defined() ? "has" : "does not");
  if (!src.defined()) return;
  QFLOW_CHECK(src.sizes() == dst.sizes(), "{}: shape {} does not match {}", what, src.sizes(), dst.sizes());
  NoGradGuard no_grad;
  dst.copy_(src.detach());
}

}  // namespace detail

}  // namespace qflow::quant
