#pragma once
// The deployable modules: what a trained QAT model becomes once every quantization parameter
// is fixed. BN is folded for good, the weights are stored already fake-quantized (on their
// integer grid times weight_scale), and the input is quantized with the frozen statistics of
// the QAT input observer — in integers by default (Note [Integer activations] below), or
// fake-quantized in the float simulation. Nothing is observed or updated any more, in any mode.
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
//
// Note [Integer activations]
// By default (set_integer) a deployed layer computes in integers what its float simulation
// computes with fake-quantized floats: the input quantized once with the frozen input qparams
// (uint8 on affine grids, int8 on symmetric ones), int8 weights (quantize's integers, kept
// until a tensor changes), int32 sums and the float scaling of quantized_conv2d (Note [Integer
// convolution]). Where the integers cannot express the layer (more than 8 bits, a weight zero
// point, a zero scale, padding="same") it runs the float simulation, and integer_unsupported()
// says why. Between layers the activations stay in the kernels' layout (nhwc on oneDNN), so
// neither quantize nor the convolution reorders them. quant::chain_integer_layers goes further:
// a layer whose only consumer is another integer layer requantizes its output onto that layer's
// input grid inside the kernel (requantize_output), the consumer taking the integers as they
// are — the uint8 tensor between them is exactly what the consumer's quantize would have made,
// up to the float rounding of the scaling. A layer given integers checks they are of its input
// type; the float simulation dequantizes them first.
#include "qflow/nn/layers/conv.h"
#include "qflow/nn/layers/linear.h"
#include "qflow/quant/integer_form.h"
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
  /// conv2d(fake_quantize(x, input_scale, input_zero_point), weight, bias), then the fused
  /// ReLU; in integers (the default) where integer_unsupported() is empty:
  /// quantized_conv2d(quantize(x), the weight's int8 grid values) (Note [Integer activations]).
  Tensor forward(const Tensor& x) override;
  /// (x, residual): forward(x) + residual before the fused ReLU — a ResNet block's add, which
  /// the integer kernel makes as a post-op (quant::chain_integer_layers installs it).
  TensorList forward_list(const TensorList& inputs) override;
  std::string extra_repr() const override;
  const nn::Conv2dOptions& options() const { return options_; }
  const QConfig& qconfig() const { return qconfig_; }
  /// Runs the integer convolution (true, the default) or the float simulation (false).
  void set_integer(bool on) { integer_ = on; }
  bool integer() const { return integer_; }
  /// True when forward runs the integer kernel: integer() and nothing unsupported.
  bool runs_integer() const { return integer_ && integer_unsupported().empty(); }
  /// Why this layer cannot run in integers ("" when it can): more than 8 bits, a weight zero
  /// point other than 0, a zero scale, padding="same".
  std::string integer_unsupported() const;
  /// Writes, in integers, the quantized input of the layer whose input qparams `grid` holds
  /// (Note [Integer activations]); std::nullopt writes float32 again.
  void requantize_output(std::optional<detail::OutputGrid> grid) { output_grid_ = std::move(grid); }
  const std::optional<detail::OutputGrid>& output_grid() const { return output_grid_; }
  /// Adds the residual of forward_list into the residual tensor itself, which then holds the
  /// result (quantized_conv2d_add_: the faster kernels). Only for a residual nothing reads
  /// afterwards: quant::fuse_integer_layers sets it from the graph.
  void add_residual_in_place(bool on) { residual_in_place_ = on; }
  bool adds_residual_in_place() const { return residual_in_place_; }
  /// A DConv2d sharing this one's tensors that applies a ReLU to its output (in integers as
  /// the convolution's post-op); fx::fuse_activations installs it.
  nn::ModulePtr fused_with_relu() const override;
  bool applies_relu() const { return applies_relu_; }

  Tensor weight, bias;
  Tensor input_scale, input_zero_point, weight_scale, weight_zero_point;

 private:
  Tensor run(const Tensor& x, const Tensor& residual);
  detail::DeployedTensors tensors() const;

  nn::Conv2dOptions options_;
  QConfig qconfig_;
  bool integer_ = true;
  bool applies_relu_ = false;
  bool residual_in_place_ = false;
  std::optional<detail::OutputGrid> output_grid_;
  detail::IntegerFormCache integer_form_;
};

class DLinear : public nn::Cloneable<DLinear> {
 public:
  explicit DLinear(nn::LinearOptions options, QConfig qconfig = {});
  /// The weight fake-quantized with the weight observer's statistics, the input qparams from
  /// the input observer (same checks as DConv2d::from_qconv2d).
  static std::shared_ptr<DLinear> from_qlinear(const QLinear& qlinear);
  void reset();
  /// linear(fake_quantize(x, input_scale, input_zero_point), weight, bias); in integers (the
  /// default) where integer_unsupported() is empty, as a 1×1 quantized_conv2d.
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const nn::LinearOptions& options() const { return options_; }
  const QConfig& qconfig() const { return qconfig_; }
  /// As DConv2d's.
  void set_integer(bool on) { integer_ = on; }
  bool integer() const { return integer_; }
  bool runs_integer() const { return integer_ && integer_unsupported().empty(); }
  std::string integer_unsupported() const;

  Tensor weight, bias;
  Tensor input_scale, input_zero_point, weight_scale, weight_zero_point;

 private:
  detail::DeployedTensors tensors() const;

  nn::LinearOptions options_;
  QConfig qconfig_;
  bool integer_ = true;
  detail::IntegerFormCache integer_form_;
};

/// set_integer(on) on every DConv2d and DLinear in `model` (the float simulation with false);
/// returns how many layers it set.
size_t set_integer(nn::Module& model, bool on);

/// One line per deployed layer that does not run integers: "layer1.0.conv1: 16 bits do not fit
/// int8" (or "... : integer=False" when switched off); empty when every layer does.
std::vector<std::string> float_layers(nn::Module& model);

}  // namespace qflow::quant
