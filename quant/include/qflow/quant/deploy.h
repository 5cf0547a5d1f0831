#pragma once
// The deployable modules: what a trained QAT model becomes once every quantization parameter
// is fixed. BN is folded for good, the weights are stored already fake-quantized (on their
// integer grid times weight_scale), and the input is fake-quantized with the frozen
// statistics of the QAT input observer. Nothing is observed or updated any more, in any mode.
//
// Note [Deployed module layout]
// Parameters: weight (on its grid), bias (float; for a folded QConvBN always present).
// Buffers: input_scale, input_zero_point ((1): activations are quantized per tensor),
// weight_scale, weight_zero_point ((1), or (C) for per-channel QConfigs) — the grid of weight,
// kept so an exporter can recover the integers round(weight / weight_scale) + weight_zero_point
// and a graph can show them. A scale of 0 means "not quantized" (a source module whose fake
// quantization was disabled).
// Built from a trained Q module by the static factories below; their eval outputs equal the Q
// module's eval outputs (same operations on the same values).
#include "qflow/nn/layers/conv.h"
#include "qflow/nn/layers/linear.h"
#include "qflow/quant/qconv.h"
#include "qflow/quant/qconvbn.h"
#include "qflow/quant/qlinear.h"

namespace qflow::quant {

class DConv2d : public nn::Cloneable<DConv2d> {
 public:
  /// An empty deployable conv (weights as nn::Conv2d initialises them, all scales 0); the
  /// factories fill it.
  explicit DConv2d(nn::Conv2dOptions options, QConfig qconfig = {});
  /// BN folded with the running statistics, the folded weight fake-quantized with the weight
  /// observer's statistics, the input qparams from the input observer. Throws when fake
  /// quantization is on and an observer has never recorded anything.
  static std::shared_ptr<DConv2d> from_qconvbn(const QConvBN& qconvbn);
  static std::shared_ptr<DConv2d> from_qconv2d(const QConv2d& qconv);
  void reset();
  /// conv2d(fake_quantize(x, input_scale, input_zero_point), weight, bias); with
  /// set_integer(true), where integer_unsupported() is empty, the same function in integers:
  /// quantized_conv2d(quantize(x), the weight's int8 grid values) (Note [Integer convolution]).
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const nn::Conv2dOptions& options() const { return options_; }
  const QConfig& qconfig() const { return qconfig_; }
  /// Runs the integer convolution (true) or the float simulation (false, the default for now).
  void set_integer(bool on) { integer_ = on; }
  bool integer() const { return integer_; }
  /// Why this layer cannot run in integers ("" when it can): more than 8 bits, a weight zero
  /// point other than 0, a zero scale, padding="same".
  std::string integer_unsupported() const;
  /// A DConv2d sharing this one's tensors that applies a ReLU to its output (in integers as
  /// the convolution's post-op); fx::fuse_activations installs it.
  nn::ModulePtr fused_with_relu() const override;

  Tensor weight, bias;
  Tensor input_scale, input_zero_point, weight_scale, weight_zero_point;

 private:
  /// The int8 weights (weight / weight_scale, exact grid values) and s_x * s_w, rebuilt when
  /// the weight or a scale changed (a state_dict load).
  void refresh_integer_weights();

  nn::Conv2dOptions options_;
  QConfig qconfig_;
  bool integer_ = false;
  bool applies_relu_ = false;
  Tensor int8_weight_, output_scale_;
  uint64_t int8_source_version_ = ~uint64_t{0};
};

class DLinear : public nn::Cloneable<DLinear> {
 public:
  explicit DLinear(nn::LinearOptions options, QConfig qconfig = {});
  /// The weight fake-quantized with the weight observer's statistics, the input qparams from
  /// the input observer (same checks as DConv2d::from_qconv2d).
  static std::shared_ptr<DLinear> from_qlinear(const QLinear& qlinear);
  void reset();
  /// linear(fake_quantize(x, input_scale, input_zero_point), weight, bias).
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const nn::LinearOptions& options() const { return options_; }
  const QConfig& qconfig() const { return qconfig_; }

  Tensor weight, bias;
  Tensor input_scale, input_zero_point, weight_scale, weight_zero_point;

 private:
  nn::LinearOptions options_;
  QConfig qconfig_;
};

}  // namespace qflow::quant
