#include "qflow/quant/qlinear.h"

#include "qflow/nn/functional.h"

namespace qflow::quant {

QLinear::QLinear(nn::LinearOptions options, QConfig qconfig) : QuantModule(qconfig), options_(options) { reset(); }

// See QConv2d::reset.
void QLinear::reset() {
  const nn::Linear init(options_);
  weight = register_parameter("weight", init.weight.detach().clone());
  bias = options_.bias ? register_parameter("bias", init.bias.detach().clone()) : Tensor();
  register_observers(*this, options_.out);
}

std::shared_ptr<QLinear> QLinear::from_float(const nn::Linear& linear, const QConfig& qconfig) {
  auto q = std::make_shared<QLinear>(linear.options(), qconfig);
  q->to(linear.weight.dtype());  // a float64 source gives a float64 module
  detail::copy_param(q->weight, linear.weight, "QLinear::from_float: weight");
  detail::copy_param(q->bias, linear.bias, "QLinear::from_float: bias");
  q->train(linear.is_training());
  return q;
}

Tensor QLinear::forward(const Tensor& x) { return F::linear(quantize_input(x), quantize_weight(weight), bias); }

std::string QLinear::extra_repr() const {
  return fmt::format("in_features={}, out_features={}, bias={}{}", options_.in, options_.out,
                     options_.bias ? "True" : "False", qconfig_repr());
}

}  // namespace qflow::quant
