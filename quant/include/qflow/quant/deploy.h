#pragma once
// The deployable modules: what a trained QAT model becomes once every quantization parameter
// is fixed. BN is folded for good, the weights are stored as the integers of their grid (the
// fake-quantized weight divided by weight_scale), and the input is quantized with the frozen
// statistics of the QAT input observer — in integers by default (Note [Integer activations]
// below), or fake-quantized in the float simulation. Nothing is observed or updated any more,
// in any mode.
//
// Note [Deployed module layout]
// Parameters: weight (integers need no gradient: nothing trains a deployed model), bias
// (float; for a folded QConvBN always present).
// Buffers: input_scale, input_zero_point ((1): activations are quantized per tensor),
// weight_scale, weight_zero_point ((1), or (C) for per-channel QConfigs) — the grid of weight.
// `weight` holds the grid integers q, as PyTorch's quantized modules hold int8 weights: the
// float weight the QAT model computed with is (q - weight_zero_point) * weight_scale, bit for
// bit what fake_quantize made (float_weight() derives it for the float simulation, once per
// change of the tensors). The integer type is the smallest that holds the grid
// [quant_min, quant_max] (detail::weight_integer_type):
//   int8   symmetric grids up to 8 bits: weight_zero_point is 0, and the integer kernels take
//          these integers as they are;
//   uint8  affine grids up to 8 bits, with their zero point: still a quarter of float32, but
//          oneDNN's integer convolutions take neither uint8 weights nor a weight zero point,
//          so these layers run the float simulation;
//   int32  grids wider than 8 bits (qflow has no int16): exact, not smaller, float simulation.
// A weight no grid reproduces exactly stays float32 (WeightStorage::Float): a source module
// whose fake quantization was off (its scales are 0, "not quantized"), or a channel of scale 0
// with nonzero weights. So a deploy state_dict is about 4x smaller than the float model's, and
// the stored integers are the ones an exporter writes (int8/uint8 initializers, Note [Q/DQ
// export]). Loading is strict: a file's weight must have the layer's integer type
// (load_state_dict refuses float values for integers, Note [load_state_dict converts dtypes]);
// a deploy state_dict written before weights were integers holds them as floats on their grid,
// which quant::upgrade_deploy_state_dict converts exactly (deploy_upgrade.h) before the load.
// A scale of 0 means "not quantized" (a source module whose fake quantization was disabled).
// Built from a trained Q module by the static factories below; their eval outputs equal the Q
// module's eval outputs (same operations on the same values).
//
// Note [Integer activations]
// By default (set_integer) a deployed layer computes in integers what its float simulation
// computes with fake-quantized floats: the input quantized once with the frozen input qparams
// (uint8 on affine grids, int8 on symmetric ones), the layer's own int8 weights, int32 sums
// and the float scaling of quantized_conv2d (Note [Integer convolution]). Where the integers
// cannot express the layer (more than 8 bits, a weight zero point or weights that are not
// int8, a zero scale, padding="same") it runs the float simulation, and integer_unsupported()
// says why. Between layers the activations stay in the kernels' layout (nhwc on oneDNN), so
// neither quantize nor the convolution reorders them. quant::fuse_integer_layers goes further:
// a layer whose only consumer is another integer layer requantizes its output onto that layer's
// input grid inside the kernel (requantize_output), the consumer taking the integers as they
// are — the uint8 tensor between them is exactly what the consumer's quantize would have made,
// up to the float rounding of the scaling. A layer given integers checks they are of its input
// type; the float simulation dequantizes them first. The residual stream of a ResNet stays
// float32 (the QAT model adds in float, with no observer after the add): a block's last
// convolution adds it before its ReLU, and where the residual is a fresh tensor nothing reads
// afterwards (every block of the zoo's ResNets) it sums into the residual's own bytes
// (add_residual_in_place, quantized_conv2d_add_), which lets oneDNN run its faster kernels.
#include "qflow/nn/layers/conv.h"
#include "qflow/nn/layers/linear.h"
#include "qflow/quant/deployed_weight.h"
#include "qflow/quant/integer_form.h"
#include "qflow/quant/qconv.h"
#include "qflow/quant/qconvbn.h"
#include "qflow/quant/qlinear.h"

namespace qflow::quant {

/// How a deployed layer stores `weight` (Note [Deployed module layout]): the integers of its
/// grid, or float32 when no grid reproduces it (the source was not quantized).
enum class WeightStorage { Integers, Float };

/// What DConv2d and DLinear share, for the callers that handle any deployed layer (set_integer,
/// float_layers, the quant meta, the numeric debugger, fuse_integer_layers) without switching
/// on its type.
class DeployedModule {
 public:
  virtual ~DeployedModule() = default;
  virtual const QConfig& qconfig() const = 0;
  /// Runs the integer kernel (true, the default) or the float simulation (false).
  virtual void set_integer(bool on) = 0;
  virtual bool integer() const = 0;
  /// Why this layer cannot run in integers ("" when it can).
  virtual std::string integer_unsupported() const = 0;
  /// True when forward runs the integer kernel: integer() and nothing unsupported.
  bool runs_integer() const { return integer() && integer_unsupported().empty(); }
  /// (q - weight_zero_point) * weight_scale: the float weight the integers stand for.
  virtual const Tensor& float_weight() const = 0;
  /// Its weight, bias and grids (Note [Deployed module layout]).
  virtual detail::DeployedTensors tensors() const = 0;
};

class DConv2d : public nn::Cloneable<DConv2d>, public DeployedModule {
 public:
  /// An empty deployable conv (integer weights 0, or float ones as nn::Conv2d initialises
  /// them; all scales 0); the factories fill it.
  explicit DConv2d(nn::Conv2dOptions options, QConfig qconfig = {}, WeightStorage storage = WeightStorage::Integers);
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
  /// the integer kernel makes as a post-op (quant::fuse_integer_layers installs it).
  TensorList forward_list(const TensorList& inputs) override;
  std::string extra_repr() const override;
  const nn::Conv2dOptions& options() const { return options_; }
  const QConfig& qconfig() const override { return qconfig_; }
  /// Runs the integer convolution (true, the default) or the float simulation (false).
  void set_integer(bool on) override { integer_ = on; }
  bool integer() const override { return integer_; }
  /// Why this layer cannot run in integers ("" when it can): more than 8 bits, a weight zero
  /// point other than 0, a zero scale, padding="same".
  std::string integer_unsupported() const override;
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

  /// (q - weight_zero_point) * weight_scale: the float weight the integers stand for, which
  /// the float simulation computes with (`weight` itself when it is stored in float).
  const Tensor& float_weight() const override;
  detail::DeployedTensors tensors() const override;

  Tensor weight, bias;  // weight: the grid integers (Note [Deployed module layout])
  Tensor input_scale, input_zero_point, weight_scale, weight_zero_point;

 private:
  Tensor run(const Tensor& x, const Tensor& residual);

  nn::Conv2dOptions options_;
  QConfig qconfig_;
  WeightStorage storage_;
  mutable VersionedCache<Tensor> float_weight_;  // Note [Versioned caches]
  bool integer_ = true;
  bool applies_relu_ = false;
  bool residual_in_place_ = false;
  std::optional<detail::OutputGrid> output_grid_;
  VersionedCache<detail::IntegerForm> integer_form_;
};

class DLinear : public nn::Cloneable<DLinear>, public DeployedModule {
 public:
  explicit DLinear(nn::LinearOptions options, QConfig qconfig = {}, WeightStorage storage = WeightStorage::Integers);
  /// The weight fake-quantized with the weight observer's statistics, the input qparams from
  /// the input observer (same checks as DConv2d::from_qconv2d).
  static std::shared_ptr<DLinear> from_qlinear(const QLinear& qlinear);
  void reset();
  /// linear(fake_quantize(x, input_scale, input_zero_point), weight, bias); in integers (the
  /// default) where integer_unsupported() is empty, as a 1×1 quantized_conv2d.
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const nn::LinearOptions& options() const { return options_; }
  const QConfig& qconfig() const override { return qconfig_; }
  /// As DConv2d's.
  void set_integer(bool on) override { integer_ = on; }
  bool integer() const override { return integer_; }
  std::string integer_unsupported() const override;

  /// As DConv2d's.
  const Tensor& float_weight() const override;
  detail::DeployedTensors tensors() const override;

  Tensor weight, bias;  // weight: the grid integers (Note [Deployed module layout])
  Tensor input_scale, input_zero_point, weight_scale, weight_zero_point;

 private:

  nn::LinearOptions options_;
  QConfig qconfig_;
  WeightStorage storage_;
  mutable VersionedCache<Tensor> float_weight_;  // Note [Versioned caches]
  bool integer_ = true;
  VersionedCache<detail::IntegerForm> integer_form_;
};

/// set_integer(on) on every DConv2d and DLinear in `model` (the float simulation with false);
/// returns how many layers it set.
size_t set_integer(nn::Module& model, bool on);

/// One line per deployed layer that does not run integers: "layer1.0.conv1: 16 bits do not fit
/// int8" (or "... : integer=False" when switched off); empty when every layer does.
std::vector<std::string> float_layers(nn::Module& model);

}  // namespace qflow::quant
