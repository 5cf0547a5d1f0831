#pragma once
// QConfig: how a model is quantized (bit width, integer grid, scale formula, granularity,
// observer momentum, gradient estimator). The numerics each option selects are spelled out
// in Note [Quantization numerics] (fake_quantize.h).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace qflow::quant {

/// The integer grid: symmetric [-2^(b-1), 2^(b-1) - 1] with zero_point 0, or affine
/// [0, 2^b - 1] with a zero_point that maps the observed min to 0.
enum class Scheme { Symmetric, Affine };
/// How a scale is derived from a range: google (range / grid size, TensorFlow's and
/// PyTorch's) or cambricon (the power of two that fits the range; symmetric only).
enum class Formula { Google, Cambricon };
/// Straight-through estimator of fake_quantize's backward: pure passes the gradient
/// unchanged (OneFlow); clipped zeroes it where the input fell outside the grid (PyTorch,
/// TensorRT).
enum class Ste { Pure, Clipped };
/// How QConvBN folds BatchNorm while training (Note [Folding BN during QAT]): running (the
/// default) folds the running statistics and lets a BatchNorm on the rescaled conv output apply
/// the batch ones (PyTorch's ConvBn2d; one conv); batch folds the batch statistics into the
/// weight before quantizing it (OneFlow; a second, float conv computes them). Note [Which BN
/// fold is the default] says why.
enum class BnFold { Batch, Running };
/// What sets a layer's scales (Note [Learned scales] in learned_quantizer.h, Note [Histogram
/// observers] in histogram_observer.h):
///   moving_average  the default: activations keep a moving average of their ranges, weights
///                   the range of the current weight;
///   minmax          activations keep the widest range seen since the start (PyTorch's
///                   MinMaxObserver), weights the range of the current weight;
///   lsq             the scale is a parameter trained with the model (Esser et al. 2019),
///                   activations and weights;
///   tqt             log2 of a threshold is a parameter, the scale its power of two (Jain et
///                   al. 2020), activations and weights; symmetric only;
///   histogram       activations: the range minimizing the L2 quantization error over a
///                   histogram (PyTorch's HistogramObserver); weights as minmax;
///   percentile      activations: the range between the (100 − p) and p percentiles of a
///                   histogram (QConfig::percentile); weights as minmax;
///   mse             activations: the clipping of the observed range that minimizes the
///                   squared error of this QConfig's own grid over a histogram; weights as
///                   minmax.
/// The last three are meant for post-training calibration.
enum class ObserverKind { MovingAverage, MinMax, Lsq, Tqt, Histogram, Percentile, Mse };
/// How lsq and tqt initialise a learned scale from the first tensor they see: lsq, the
/// paper's 2·mean|x|/√Qp; range, the scale the tensor's min/max range gives (for tqt the
/// cambricon power of two).
enum class ScaleInit { Lsq, Range };

// Note [Weight and activation bits]
// `bits` is the weights' width and, unless activation_bits is set, the activations' too.
// W4A8 — 4-bit weights, 8-bit activations, the usual low-bit point: a weight's error is paid
// once per multiply-accumulate and averages out over a long dot product, an activation's error
// reaches every output channel — is {.bits = 4, .activation_bits = 8}. Everything about an
// activation grid reads activations() (a copy with bits = activation_bits): a Q module's input
// observer and input fake quantization, a deployed layer's input quantization, the
// requantization of a fused integer layer into the next layer's input grid, the ONNX input
// Q/DQ. Everything about weights reads `bits`. Both widths must fit int8 for the integer
// kernels (a 4-bit weight grid is a subset of int8's, so W4A8 runs integer). to_string and the
// JSON write activation_bits only when it is set, so a QConfig without it prints as it did
// before the field existed (checkpoints compare these texts on --resume).
struct QConfig {
  int64_t bits = 8;
  Scheme scheme = Scheme::Symmetric;
  Formula formula = Formula::Google;
  /// true: one scale per tensor; false: weights get one scale per output channel (axis 0).
  /// Activations are always quantized per tensor.
  bool per_layer = true;
  /// Activation observers: avg = momentum * avg + (1 - momentum) * current.
  double momentum = 0.95;
  Ste ste = Ste::Pure;
  BnFold bn_fold = BnFold::Running;
  /// Bits of the activations (each layer's quantized input) when they differ from the
  /// weights' `bits`: W4A8 is {.bits = 4, .activation_bits = 8}. Unset: `bits` for both.
  std::optional<int64_t> activation_bits = std::nullopt;
  ObserverKind observer = ObserverKind::MovingAverage;
  /// observer = percentile: the upper percentile kept (the lower one is 100 − percentile).
  double percentile = 99.99;
  /// observer = lsq or tqt: how the learned scale is initialised.
  ScaleInit scale_init = ScaleInit::Lsq;
  /// observer = lsq with the affine scheme: the zero point is learned too (LSQ+); otherwise it
  /// stays where the initialisation put it.
  bool learn_zero_point = false;

  /// The QConfig the activations are quantized with: this one with bits = activation_bits
  /// (Note [Weight and activation bits]).
  QConfig activations() const;
  /// Throws qflow::Error for bits or activation_bits outside 2..16, cambricon with affine,
  /// momentum outside [0, 1), percentile outside (50, 100], tqt with affine, lsq with cambricon
  /// (a learned scale is no power of two: that is tqt), learn_zero_point without lsq and affine.
  void validate() const;
  /// Lowest integer of the grid: -2^(bits-1) (symmetric) or 0 (affine).
  int64_t quant_min() const;
  /// Highest integer of the grid: 2^(bits-1) - 1 (symmetric) or 2^bits - 1 (affine).
  int64_t quant_max() const;
  /// "QConfig(bits=8, scheme=symmetric, formula=google, per_layer=true, momentum=0.95, ste=pure)",
  /// followed by ", bn_fold=batch" when bn_fold is not the default, and likewise the observer
  /// fields (", observer=lsq", ", percentile=99.9", ", scale_init=range",
  /// ", learn_zero_point=true") when they are not. (Until 2026-11-24 batch was
  /// the default and the text omitted it: a QAT checkpoint from then resumes with the running
  /// fold. Its parameters and statistics mean the same under either fold; only how training
  /// folds BN from the next step on differs.)
  std::string to_string() const;

  bool operator==(const QConfig&) const = default;
};

std::string_view to_string(Scheme s);
std::string_view to_string(Formula f);
std::string_view to_string(Ste s);
std::string_view to_string(BnFold f);
std::string_view to_string(ObserverKind k);
std::string_view to_string(ScaleInit i);
/// Inverse of to_string ("symmetric", "affine", ...); throws naming the accepted words.
Scheme parse_scheme(std::string_view text);
Formula parse_formula(std::string_view text);
Ste parse_ste(std::string_view text);
BnFold parse_bn_fold(std::string_view text);
ObserverKind parse_observer(std::string_view text);
ScaleInit parse_scale_init(std::string_view text);
/// True for lsq and tqt: the scales are parameters the optimizer trains.
bool learns_scale(ObserverKind k);

}  // namespace qflow::quant
