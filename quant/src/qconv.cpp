#include "qflow/quant/qconv.h"

#include "qflow/nn/functional.h"

namespace qflow::quant {

QConv2d::QConv2d(nn::Conv2dOptions options, QConfig qconfig) : QuantModule(qconfig), options_(options) { reset(); }

// The float layer validates the options and initialises the parameters; see Note [Module
// cloning] for why the values are built before registering.
void QConv2d::reset() {
  const nn::Conv2d init(options_);
  weight = register_parameter("weight", init.weight.detach().clone());
  bias = options_.bias ? register_parameter("bias", init.bias.detach().clone()) : Tensor();
  register_observers(*this, options_.out);
}

std::shared_ptr<QConv2d> QConv2d::from_float(const nn::Conv2d& conv, const QConfig& qconfig) {
  auto q = std::make_shared<QConv2d>(conv.options(), qconfig);
  q->to(conv.weight.dtype());  // a float64 source gives a float64 module
  detail::copy_param(q->weight, conv.weight, "QConv2d::from_float: weight");
  detail::copy_param(q->bias, conv.bias, "QConv2d::from_float: bias");
  q->train(conv.is_training());
  return q;
}

Tensor QConv2d::forward(const Tensor& x) {
  const auto& o = options_;
  const Tensor xq = quantize_input(x);
  const Tensor wq = quantize_weight(weight);
  return F::conv2d(xq, wq, bias, o.stride.list(), o.padding, o.dilation.list(), o.groups);
}

std::string QConv2d::extra_repr() const { return detail::conv_repr(options_) + qconfig_repr(); }

}  // namespace qflow::quant
