#pragma once
// QLinear: a Linear trained with fake-quantized input and weight. See Note [QAT module layout].
#include "qflow/nn/layers/linear.h"
#include "qflow/quant/quant_module.h"

namespace qflow::quant {

class QLinear : public nn::Cloneable<QLinear>, public QuantModule {
 public:
  /// Same options as nn::Linear; weight and bias are initialised like nn::Linear's.
  explicit QLinear(nn::LinearOptions options, QConfig qconfig = {});
  /// A QLinear with a copy of linear's options, weight and bias (linear is left untouched).
  static std::shared_ptr<QLinear> from_float(const nn::Linear& linear, const QConfig& qconfig);
  void reset();
  /// linear(fake_quantize(x), fake_quantize(weight), bias).
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const nn::LinearOptions& options() const { return options_; }

  const char* float_type() const override { return "Linear"; }
  Tensor float_weight() const override { return weight; }
  nn::ModulePtr deploy() const override;
  Tensor quantized_weight() const override;

  Tensor weight;
  Tensor bias;

 private:
  nn::LinearOptions options_;
};

}  // namespace qflow::quant
