#pragma once
// What the quantization-aware modules (QConv2d, QLinear, QConvBN) share: their QConfig, the
// fake-quantization switch and the two observers of Note [QAT module layout].
//
// Note [QAT module layout]
// A Q module keeps its float parameters under the float module's names (weight, bias, and
// bn.* for QConvBN) plus two observer children:
//   input_observer   per tensor: the input activations
//   weight_observer  per tensor or (per_layer = false) per output channel: the weight
//                    actually convolved (for QConvBN the BN-folded weight)
// of the types QConfig::observer selects (make_input_observer, make_weight_observer): by
// default a MovingAverageMinMaxObserver and a MinMaxObserver; LsqQuantizer or TqtQuantizer
// for both with learned scales (Note [Learned scales]), whose parameters are then the Q
// module's too (input_observer.scale, weight_observer.log2_threshold, ...).
// Forward: x_q = input_observer->fake_quantize(x) (fake_quantize with its qparams; for a
// learned quantizer differentiable in its scale), w_q likewise with weight_observer, then the
// float op on x_q and w_q. Observers record before their qparams
// are read, so a training step quantizes with the range of the batch it sees. With
// fake quantization disabled the module computes exactly its float counterpart (observers
// still record unless frozen, so their statistics are ready when quantization is switched on).
#include <string>

#include "qflow/nn/layers/conv.h"
#include "qflow/quant/observer.h"

namespace qflow::quant {

class QuantModule {
 public:
  virtual ~QuantModule() = default;

  // What the deploy pass, the numeric debugger's weight comparison and the quant meta need of
  // any Q module, so that none of them switches on its type.
  /// The float module type it replaces (and the mapping resolves it as): "Conv2d" or "Linear".
  virtual const char* float_type() const = 0;
  /// Whether it holds a BatchNorm (child "bn") that its deployed form folds: QConvBN.
  virtual bool folds_batchnorm() const { return false; }
  /// Whether it applies a ReLU to its output itself (QConvBN::fused_with_relu()); its deployed
  /// form does not, so the deploy pass puts a relu after it.
  virtual bool applies_relu() const { return false; }
  /// The float weight it computes with before fake quantization, without autograd history
  /// where it is computed (QConvBN: folded with the running statistics).
  virtual Tensor float_weight() const = 0;
  /// Its deployable form, a DConv2d or DLinear (Note [Deployed module layout]); this module is
  /// left untouched.
  virtual nn::ModulePtr deploy() const = 0;
  /// The weight the deployed form computes with: float_weight() fake-quantized exactly as the
  /// eval forward does (DConv2d/DLinear::float_weight() of deploy()).
  virtual Tensor quantized_weight() const = 0;

  const QConfig& qconfig() const { return qconfig_; }
  /// Switches fake quantization of input and weight on or off (on by default).
  void enable_fake_quant(bool on = true) { fake_quant_ = on; }
  bool fake_quant_enabled() const { return fake_quant_; }

  std::shared_ptr<Observer> input_observer;
  std::shared_ptr<Observer> weight_observer;

 protected:
  explicit QuantModule(const QConfig& qconfig);
  QuantModule(const QuantModule&) = default;
  /// Registers input_observer and weight_observer on `self` (weights with `out_channels`
  /// ranges when the QConfig is per channel).
  void register_observers(nn::Module& self, int64_t out_channels);
  /// Records x in input_observer and returns it fake-quantized (or x when disabled).
  Tensor quantize_input(const Tensor& x);
  /// Records w in weight_observer and returns it fake-quantized (or w when disabled).
  Tensor quantize_weight(const Tensor& w);
  /// ", bits=8, scheme=symmetric, ..." for extra_repr.
  std::string qconfig_repr() const;

 private:
  QConfig qconfig_;
  bool fake_quant_ = true;
};

/// Switches fake quantization on or off in every Q module of `root`'s tree; returns how many.
int64_t enable_fake_quant(nn::Module& root, bool on = true);

namespace detail {
/// "3, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1)" like nn::Conv2d's repr.
std::string conv_repr(const nn::Conv2dOptions& o);
/// Copies src into dst (same shape) without recording autograd history.
void copy_param(Tensor& dst, const Tensor& src, const char* what);
}  // namespace detail

}  // namespace qflow::quant
