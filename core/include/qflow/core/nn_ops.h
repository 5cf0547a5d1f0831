#pragma once
// Normalization, activations, softmax, dropout and losses: the functional API of
// core/kernels/nn/norm.cpp, activation.cpp, softmax.cpp, dropout.cpp and loss.cpp. Each function
// is a thin typed call into the op registry (see Note [Op registration]); formulas, defaults
// and reductions follow PyTorch 1.13. Floating inputs (float32, float64) only.
//
// Optional tensors (weight, bias, running stats) are passed as undefined `Tensor()` for
// "None". The `*_backward` functions are the ops the derivative rules call; they are public
// so that a graph or a test can run them by name like any other op.
#include <cstdint>
#include <tuple>

#include "qflow/core/tensor.h"
#include "qflow/core/ops/dropout.h"
#include "qflow/core/ops/activation.h"
#include "qflow/core/ops/add_relu.h"
#include "qflow/core/ops/clamp.h"
#include "qflow/core/ops/softmax.h"

namespace qflow {

/// How a loss reduces its per-element values (PyTorch's enum: none 0, mean 1, sum 2).
enum class Reduction : int64_t { None = 0, Mean = 1, Sum = 2 };

// ---- normalization -----------------------------------------------------------------------------

/// Batch normalization over dim 1 of input (N, C), (N, C, L) or (N, C, H, W).
/// Training: normalizes with the batch mean and biased variance and, when running stats are
/// given, updates them in place (never recorded by autograd):
///   running_mean = (1 - momentum) * running_mean + momentum * mean
///   running_var  = (1 - momentum) * running_var  + momentum * unbiased_var
/// Eval: normalizes with the running stats (then required).
Tensor batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum = 0.1, double eps = 1e-5);

/// batch_norm plus the statistics it normalized with: (output, mean, invstd), mean and invstd
/// of shape (C,) (in eval the running mean and 1/sqrt(running_var + eps)). All three outputs
/// are differentiable w.r.t. input in training mode.
std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                                     const Tensor& running_mean, const Tensor& running_var,
                                                     bool training, double momentum = 0.1, double eps = 1e-5);

/// relu(batch_norm(...)) in one pass, equal to the pair bit for bit (training updates the
/// running stats the same way). Its gradient masks with the output inside batch norm's backward.
Tensor batch_norm_relu(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                       const Tensor& running_var, bool training, double momentum = 0.1, double eps = 1e-5);
/// Gradients (input, weight, bias) of batch_norm_relu: native_batch_norm_backward of
/// grad_output where output > 0 (0 elsewhere), the statistics recomputed from input.
std::tuple<Tensor, Tensor, Tensor> batch_norm_relu_backward(const Tensor& grad_output, const Tensor& output,
                                                            const Tensor& input, const Tensor& weight,
                                                            const Tensor& running_mean, const Tensor& running_var,
                                                            bool training, double eps);

/// Gradients (input, weight, bias) of batch normalization. `save_mean`/`save_invstd` are the
/// statistics the forward used; undefined in training means "recompute them from input"
/// (exactly what the forward computed). `grad_mean`/`grad_invstd` are incoming gradients of
/// native_batch_norm's statistics outputs (may be undefined, as may grad_output).
std::tuple<Tensor, Tensor, Tensor> native_batch_norm_backward(
    const Tensor& grad_output, const Tensor& input, const Tensor& weight, const Tensor& running_mean,
    const Tensor& running_var, const Tensor& save_mean, const Tensor& save_invstd, bool training, double eps,
    const Tensor& grad_mean = Tensor(), const Tensor& grad_invstd = Tensor());

// ---- activations -------------------------------------------------------------------------------

// hardtanh, relu6, hardswish, leaky_relu and their backward ops: declared in
// core/ops/activation.toml, their typed functions generated (Note [One declaration per op]).

// ---- softmax -----------------------------------------------------------------------------------

// softmax, log_softmax and their backward ops: declared in core/ops/softmax.toml.

// ---- dropout -----------------------------------------------------------------------------------

/// Zeroes each element with probability p (drawn from the current generator, see
/// qflow::manual_seed) and scales the kept ones by 1 / (1 - p). Identity when !train or
/// p == 0; zeros when p == 1.
Tensor dropout(const Tensor& input, double p = 0.5, bool train = true);
/// dropout plus its bool keep-mask: (output, mask). See Note [Dropout keeps its mask].
std::tuple<Tensor, Tensor> native_dropout(const Tensor& input, double p, bool train);

// ---- losses ------------------------------------------------------------------------------------

/// Negative log likelihood of class-index targets. self: log-probabilities (N, C),
/// (N, C, d1, ...) or (C,); target: int64 (N), (N, d1, ...) or (). Targets equal to
/// ignore_index contribute nothing; Mean divides by the summed weight of the others.
Tensor nll_loss(const Tensor& self, const Tensor& target, const Tensor& weight = Tensor(),
                Reduction reduction = Reduction::Mean, int64_t ignore_index = -100);
/// log_softmax over the class dim followed by nll_loss, with PyTorch 1.13's label smoothing:
///   (1 - eps) * nll + (eps / C) * sum_c w_c * (-log_softmax_c)   (per element, then reduced,
/// Mean dividing both terms by the same summed target weight).
Tensor cross_entropy(const Tensor& self, const Tensor& target, const Tensor& weight = Tensor(),
                     Reduction reduction = Reduction::Mean, int64_t ignore_index = -100,
                     double label_smoothing = 0.0);
/// mean/sum/none of (self - target)^2; shapes must be equal.
Tensor mse_loss(const Tensor& self, const Tensor& target, Reduction reduction = Reduction::Mean);
/// mean/sum/none of |self - target|; shapes must be equal.
Tensor l1_loss(const Tensor& self, const Tensor& target, Reduction reduction = Reduction::Mean);

/// Gradients w.r.t. `self` of the losses above for an incoming `grad_output` (a scalar for
/// Mean/Sum, the per-element shape for None).
Tensor nll_loss_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target, const Tensor& weight,
                         Reduction reduction, int64_t ignore_index);
Tensor cross_entropy_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                              const Tensor& weight, Reduction reduction, int64_t ignore_index,
                              double label_smoothing);
Tensor mse_loss_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target, Reduction reduction);
Tensor l1_loss_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target, Reduction reduction);

}  // namespace qflow
