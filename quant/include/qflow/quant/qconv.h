#pragma once
// QConv2d: a Conv2d trained with fake-quantized input and weight. See Note [QAT module layout].
#include "qflow/nn/layers/conv.h"
#include "qflow/quant/quant_module.h"

namespace qflow::quant {

class QConv2d : public nn::Cloneable<QConv2d>, public QuantModule {
 public:
  /// Same options as nn::Conv2d; weight and bias are initialised like nn::Conv2d's.
  explicit QConv2d(nn::Conv2dOptions options, QConfig qconfig = {});
  /// A QConv2d with a copy of conv's options, weight and bias (conv is left untouched).
  static std::shared_ptr<QConv2d> from_float(const nn::Conv2d& conv, const QConfig& qconfig);
  void reset();
  /// conv2d(fake_quantize(x), fake_quantize(weight), bias).
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const nn::Conv2dOptions& options() const { return options_; }

  const char* float_type() const override { return "Conv2d"; }
  Tensor float_weight() const override { return weight; }
  nn::ModulePtr deploy() const override;
  Tensor quantized_weight() const override;

  Tensor weight;
  Tensor bias;

 private:
  nn::Conv2dOptions options_;
};

}  // namespace qflow::quant
