#pragma once
// Learned quantization scales: LSQ (Esser et al. 2019, "Learned Step Size Quantization") and
// TQT's power-of-two thresholds (Jain et al. 2020, "Trained Quantization Thresholds"). Both are
// observers (observer.h) whose qparams are parameters the optimizer trains with the weights.
//
// Note [Learned scales]
// Forward, both: q = clamp(x / s + z, quant_min, quant_max) rounded half to even, out =
// (q − z) · s — written with autograd ops whose values are bit for bit those of the
// fake_quantize kernel (round(v) − v is exact for |round(v) − v| <= 1/2, so v + (round(v) −
// v) is round(v); a − a is 0), which is why the deploy pass, the ONNX export and the integer
// model take a learned scale as they take an observed one: calculate_qparams() returns it.
// LSQ: the scale is the parameter `scale` ((1), or (C) per output channel for weights);
//   in training forward it is clamped to >= 1e-8 in place, as PyTorch's learnable fake
//   quantization clamps it. Gradients (the paper's, with s scaled by g):
//     ∂out/∂x = 1 inside the grid, 0 where x / s + z was clamped (the clipped estimator);
//     ∂out/∂s = round(x/s + z) − z − x/s inside, quant_min − z or quant_max − z where clamped;
//     ∂out/∂z = 0 inside, −s where clamped (zero point learned only with learn_zero_point,
//               as LSQ+; it is rounded straight through and clamped to the grid);
//   then multiplied by g = 1/√(N·Qp), N the elements one scale covers, Qp = quant_max
//   (s_g = s + (s·g − s·g) with the second term detached: the value is s, the gradient g).
// TQT: the parameter is `log2_threshold` l; the scale is s = 2^(⌈l⌉ − (b − 1)), a power of two
//   on the cambricon grid (a threshold t between 2^(k−1) and 2^k gives the scale the cambricon
//   formula gives a range of max |x| = t); symmetric only. ⌈·⌉ is straight-through, so
//   ∂s/∂l = s·ln 2 and ∂out/∂l = s·ln 2·(round(x/s) − x/s) inside, s·ln 2·(quant_min or
//   quant_max) where clamped — the paper's gradient — scaled by the same g (the paper trains
//   l with Adam, whose normalisation g stands in for under qflow-train's SGD).
// Initialisation: the first tensor seen in training mode (not frozen) sets the parameters —
// QConfig::scale_init lsq: s = 2·mean|x| / √Qp (per channel for per-channel weights); TQT's
// threshold is then s · 2^(b−1); range: the scale the min/max range gives (for TQT the
// threshold max|x|). Affine LSQ starts its zero point at −round(min(x, 0) / s), clamped to the
// grid. Under data parallelism the statistics go through the observer's range
// synchronisation (Observer::set_range_sync), so every replica starts from the same scale.
// Until then (num_observations() == 0) fake quantization is the identity, as for an observer
// that has seen nothing. min_val/max_val keep the initialising range; num_batches_tracked
// counts the training forwards. Freezing stops initialisation and counting; the parameters
// train until the optimizer leaves them (qflow-train: no weight decay on them, see
// quant::learned_quantization_parameters).
#include "qflow/quant/observer.h"

namespace qflow::quant {

/// LSQ fake quantization with a learned `scale` (and, with learn_zero_point, `zero_point`).
/// State: parameters scale ((1) or (C)) [and zero_point], buffers zero_point (when not
/// learned), min_val, max_val, num_batches_tracked, frozen.
class LsqQuantizer : public nn::Cloneable<LsqQuantizer>, public Observer {
 public:
  explicit LsqQuantizer(ObserverOptions options = {});
  void reset();
  /// Initialises the parameters from x on the first training forward; counts; returns x.
  Tensor forward(const Tensor& x) override;
  QParams calculate_qparams() const override;
  Tensor fake_quantize(const Tensor& x) const override;
  std::string extra_repr() const override;

  Tensor scale, zero_point;
};

/// TQT fake quantization with a learned `log2_threshold` (power-of-two scales, symmetric).
/// State: parameter log2_threshold ((1) or (C)); buffers min_val, max_val,
/// num_batches_tracked, frozen.
class TqtQuantizer : public nn::Cloneable<TqtQuantizer>, public Observer {
 public:
  explicit TqtQuantizer(ObserverOptions options = {});
  void reset();
  Tensor forward(const Tensor& x) override;
  QParams calculate_qparams() const override;
  Tensor fake_quantize(const Tensor& x) const override;
  std::string extra_repr() const override;

  Tensor log2_threshold;
};

/// The parameters of every learned quantizer in `root`'s tree (scales, log2 thresholds,
/// learned zero points), in `root.parameters()` order: qflow-train puts them in an optimizer
/// group without weight decay — decay would pull a scale toward 0 (more clipping each step)
/// and a log2 threshold toward a threshold of 1, neither of which is a regulariser of the
/// function the network computes.
std::vector<Tensor> learned_quantization_parameters(nn::Module& root);

namespace detail {
/// Value p, gradient g · (the incoming gradient): LSQ's gradient scaling.
Tensor scale_gradient(const Tensor& p, double g);
/// Value round(v) (half to even), gradient 1 (straight through).
Tensor round_ste(const Tensor& v);
/// Note [Learned scales]'s forward: (clamp(x / scale + zero_point) rounded − zero_point) ·
/// scale, differentiable in x, scale and zero_point; scale/zero_point (1) or (C) along axis 0.
Tensor learned_fake_quantize(const Tensor& x, const Tensor& scale, const Tensor& zero_point, int64_t quant_min,
                             int64_t quant_max);
}  // namespace detail

}  // namespace qflow::quant
