#include "qflow/quant/qlinear.h"

#include "float_counterpart.h"
#include "qflow/nn/functional.h"
#include "qflow/quant/deploy.h"

namespace qflow::quant {

QLinear::QLinear(nn::LinearOptions options, QConfig qconfig) : QuantModule(qconfig), options_(options) { reset(); }

// See QConv2d::reset.
void QLinear::reset() {
  detail::register_float_parameters<nn::Linear>(*this, options_, weight, bias);
  register_observers(*this, options_.out);
}

std::shared_ptr<QLinear> QLinear::from_float(const nn::Linear& linear, const QConfig& qconfig) {
  auto q = std::make_shared<QLinear>(linear.options(), qconfig);
  detail::copy_float_layer(*q, linear, "QLinear::from_float");
  return q;
}

Tensor QLinear::forward(const Tensor& x) { return F::linear(quantize_input(x), quantize_weight(weight), bias); }

std::string QLinear::extra_repr() const {
  return fmt::format("in_features={}, out_features={}, bias={}{}", options_.in, options_.out,
                     options_.bias ? "True" : "False", qconfig_repr());
}

// See QConv2d::deploy (Note [Deployed module layout]).
nn::ModulePtr QLinear::deploy() const { return DLinear::from_qlinear(*this); }
Tensor QLinear::quantized_weight() const { return DLinear::from_qlinear(*this)->float_weight(); }

}  // namespace qflow::quant
