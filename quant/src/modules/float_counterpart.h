#pragma once
// The form every quantization layer with a float counterpart shares — QConv2d, QLinear and
// QConvBN in training, DConv2d and DLinear deployed: parameters initialised exactly as the
// float layer initialises them, and factories that take a source module's tensors, dtype and
// training mode. Defined once here, so the five layers cannot drift apart.
#include <string>

#include "qflow/nn/module.h"
#include "qflow/quant/quant_module.h"

namespace qflow::quant::detail {

/// Registers `weight` and `bias` (undefined without options.bias) on `self` with the values a
/// `Float` layer of `options` starts with. The values are built before they are registered:
/// Note [Module cloning].
template <typename Float, typename Options>
void register_float_parameters(nn::Module& self, const Options& options, Tensor& weight, Tensor& bias) {
  const Float init(options);
  weight = self.register_parameter("weight", init.weight.detach().clone());
  bias = options.bias ? self.register_parameter("bias", init.bias.detach().clone()) : Tensor();
}

/// The from_float factories' copy: `q` takes the float layer's dtype (a float64 source gives a
/// float64 module), weight, bias and training mode. `who` names the factory in errors.
template <typename Q, typename Float>
void copy_float_layer(Q& q, const Float& source, const std::string& who) {
  q.to(source.weight.dtype());
  copy_param(q.weight, source.weight, (who + ": weight").c_str());
  copy_param(q.bias, source.bias, (who + ": bias").c_str());
  q.train(source.is_training());
}

}  // namespace qflow::quant::detail
