#pragma once
// QConvBN: Conv2d followed by BatchNorm2d, trained with BN folded into the convolution so the
// weight that gets quantized is the one a deployed model uses.
//
// Note [Folding BN during QAT]
// Parameters keep the float pair's names: weight and bias (the conv's, bias optional) and
// bn.weight (γ), bn.bias (β), bn.running_mean, bn.running_var, bn.num_batches_tracked, so a
// float Conv2d+BatchNorm2d state_dict maps onto it key by key (PyTorch's ConvBn2d layout).
// Training (BN not frozen), QConfig::bn_fold = batch (OneFlow's formulation):
//   x_q        = fake_quantize(x) (input_observer)
//   y          = conv2d(x_q, W, b)                 the float conv, for the batch statistics
//   mean, var  = batch mean and biased variance of y per channel; running_mean/running_var
//                move in PyTorch's convention, running = (1 − m)·running + m·batch with the
//                unbiased variance (OneFlow's QConvBN inverts m — not here)
//   W'         = W · γ/√(var + ε),  b' = β + (b − mean) · γ/√(var + ε)
//   out        = conv2d(x_q, fake_quantize(W') (weight_observer), b')
// mean and var stay differentiable, so with fake quantization disabled the output and every
// gradient equal Conv2d → BatchNorm2d's.
// Training with bn_fold = running (the default; PyTorch's ConvBn2d): one conv instead of two.
// With k = γ/√(running_var + ε),
//   out = batch_norm(conv2d(x_q, fake_quantize(W · k)) / k + b)   (batch statistics, running
//         statistics updated by bn itself)
// which, with fake quantization disabled, is again Conv2d → BatchNorm2d up to rounding (W·k/k).
// The weight being quantized is folded with the running statistics: what deployment uses.
// Eval (or frozen BN), both modes: the fold with the running statistics and no statistics
// update — what DConv2d::from_qconvbn bakes in for good.
// freeze_bn(true) is the late-QAT switch: training keeps going on the running statistics,
// which stop moving.
//
// Note [Which BN fold is the default]
// The QAT step should cost at most 1.25x the float step. A float Conv2d → BatchNorm2d step is
// three GEMM-sized passes per conv (forward, input gradient, weight gradient). The batch fold
// needs the statistics conv on top: its forward, and in backward the gradient of the batch
// statistics flows into W through that conv's weight gradient (which can share the pass with
// the main conv's, both read x_q) but also into x_q through its input gradient, which cannot
// share one (different output gradients meet different weights, W and W'). That is at least
// five passes against three, 1.67x before any elementwise work; measured 1.87x at batch 128
// (qflow-bench-e2e --workload qat-batch). The running fold is three passes plus elementwise
// work: 1.06x measured, and PyTorch's FX QAT (prepare_qat_fx) trains this same formulation.
// So running is the default and batch, OneFlow's definition, one flag away (--bn-fold batch).
// Both deploy identically: eval and DConv2d fold the running statistics either way.
#include "qflow/nn/layers/batchnorm.h"
#include "qflow/nn/layers/conv.h"
#include "qflow/quant/quant_module.h"

namespace qflow::quant {

class QConvBN : public nn::Cloneable<QConvBN>, public QuantModule {
 public:
  /// conv: as nn::Conv2d (bias usually false before BN); bn.features 0 means conv.out.
  /// BN must track running statistics (they are what gets folded for deployment).
  QConvBN(nn::Conv2dOptions conv, nn::BatchNormOptions bn = {}, QConfig qconfig = {});
  /// A QConvBN holding copies of conv's and bn's options, parameters and buffers; it keeps
  /// conv's training mode. The float modules are left untouched.
  static std::shared_ptr<QConvBN> from_float(const nn::Conv2d& conv, const nn::BatchNorm2d& bn, const QConfig& qconfig);
  void reset();
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  /// Stops (true) or resumes (false) batch statistics in training; see Note [Folding BN during QAT].
  void freeze_bn(bool on = true) { bn_frozen_ = on; }
  bool bn_frozen() const { return bn_frozen_; }

  /// (W', b') folded with the running statistics, without autograd history: W' before fake
  /// quantization, b' always defined.
  std::pair<Tensor, Tensor> fold_running_stats() const;

  /// A QConvBN sharing this one's parameters, buffers, observers and children that applies a
  /// ReLU to its output (in training with the running fold: batch_norm_relu); the deploy
  /// pass puts the ReLU back after its DConv2d.
  nn::ModulePtr fused_with_relu() const override;
  /// True for the fused_with_relu() form.
  bool applies_relu() const override { return applies_relu_; }
  const nn::Conv2dOptions& conv_options() const { return conv_options_; }
  const nn::BatchNormOptions& bn_options() const { return bn_options_; }

  const char* float_type() const override { return "Conv2d"; }
  bool folds_batchnorm() const override { return true; }
  /// The BN-folded weight (fold_running_stats().first): what the deployed conv computes with.
  Tensor float_weight() const override { return fold_running_stats().first; }
  nn::ModulePtr deploy() const override;
  Tensor quantized_weight() const override;

  Tensor weight;
  Tensor bias;
  std::shared_ptr<nn::BatchNorm2d> bn;

 private:
  /// (W', b') for per-channel statistics mean and invstd = 1/√(var + ε).
  std::pair<Tensor, Tensor> fold(const Tensor& mean, const Tensor& invstd) const;
  /// Batch mean and invstd of conv2d(xq, W, b), moving the running statistics.
  std::pair<Tensor, Tensor> batch_stats(const Tensor& xq);
  /// Training with bn_fold = running: the one-conv formulation above.
  Tensor forward_running_fold(const Tensor& xq);

  nn::Conv2dOptions conv_options_;
  nn::BatchNormOptions bn_options_;
  bool bn_frozen_ = false;
  bool applies_relu_ = false;
};

}  // namespace qflow::quant
