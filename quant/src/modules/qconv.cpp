#include "qflow/quant/qconv.h"

#include "float_counterpart.h"
#include "qflow/nn/functional.h"
#include "qflow/quant/deploy.h"

namespace qflow::quant {

QConv2d::QConv2d(nn::Conv2dOptions options, QConfig qconfig) : QuantModule(qconfig), options_(options) { reset(); }

// The float layer validates the options and initialises the parameters (float_counterpart.h).
void QConv2d::reset() {
  detail::register_float_parameters<nn::Conv2d>(*this, options_, weight, bias);
  register_observers(*this, options_.out);
}

std::shared_ptr<QConv2d> QConv2d::from_float(const nn::Conv2d& conv, const QConfig& qconfig) {
  auto q = std::make_shared<QConv2d>(conv.options(), qconfig);
  detail::copy_float_layer(*q, conv, "QConv2d::from_float");
  return q;
}

Tensor QConv2d::forward(const Tensor& x) {
  const auto& o = options_;
  const Tensor xq = quantize_input(x);
  const Tensor wq = quantize_weight(weight);
  return F::conv2d(xq, wq, bias, o.stride.list(), o.padding, o.dilation.list(), o.groups);
}

std::string QConv2d::extra_repr() const { return detail::conv_repr(options_) + qconfig_repr(); }

// The deploy factory fake-quantizes the weight exactly as the eval forward does (Note
// [Deployed module layout]), so its float_weight() is the weight this layer computes with.
nn::ModulePtr QConv2d::deploy() const { return DConv2d::from_qconv2d(*this); }
Tensor QConv2d::quantized_weight() const { return DConv2d::from_qconv2d(*this)->float_weight(); }

}  // namespace qflow::quant
