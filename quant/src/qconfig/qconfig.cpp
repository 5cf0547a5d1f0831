#include "qflow/quant/qconfig.h"

#include <cmath>
#include <utility>

#include "qflow/core/error.h"

namespace qflow::quant {

void QConfig::validate() const {
  // 16 is TensorFlow's limit; beyond it a float32 grid no longer holds every integer of
  // x / scale + zero_point exactly.
  QFLOW_CHECK(bits >= 2 && bits <= 16, "QConfig: bits must be in 2..16, got {}", bits);
  QFLOW_CHECK(!activation_bits || (*activation_bits >= 2 && *activation_bits <= 16),
              "QConfig: activation_bits must be in 2..16, got {}", activation_bits.value_or(0));
  QFLOW_CHECK(!(formula == Formula::Cambricon && scheme == Scheme::Affine),
              "QConfig: formula cambricon supports only the symmetric scheme (power-of-two scales have no zero "
              "point), got scheme affine");
  QFLOW_CHECK(momentum >= 0.0 && momentum < 1.0, "QConfig: momentum must be in [0, 1), got {}", momentum);
  QFLOW_CHECK(percentile > 50.0 && percentile <= 100.0, "QConfig: percentile must be in (50, 100], got {}", percentile);
  QFLOW_CHECK(!(observer == ObserverKind::Tqt && scheme == Scheme::Affine),
              "QConfig: observer tqt supports only the symmetric scheme (power-of-two scales have no zero point), got "
              "scheme affine");
  QFLOW_CHECK(!(observer == ObserverKind::Lsq && formula == Formula::Cambricon),
              "QConfig: observer lsq learns any scale, not a power of two: for power-of-two scales use observer tqt "
              "(formula cambricon is for observed ranges)");
  QFLOW_CHECK(!learn_zero_point || (observer == ObserverKind::Lsq && scheme == Scheme::Affine),
              "QConfig: learn_zero_point needs observer lsq and the affine scheme, got observer {} and scheme {}",
              quant::to_string(observer), quant::to_string(scheme));
}

int64_t QConfig::quant_min() const { return scheme == Scheme::Symmetric ? -(int64_t{1} << (bits - 1)) : 0; }

int64_t QConfig::quant_max() const {
  return scheme == Scheme::Symmetric ? (int64_t{1} << (bits - 1)) - 1 : (int64_t{1} << bits) - 1;
}

QConfig QConfig::activations() const {
  QConfig a = *this;
  a.bits = activation_bits.value_or(bits);
  a.activation_bits.reset();
  return a;
}

std::string QConfig::to_string() const {
  // Fields added after the text was first recorded in checkpoints appear only when not the
  // default, so a model trained before them keeps its text.
  const QConfig d{};
  std::string extra;
  if (bn_fold != d.bn_fold) extra += fmt::format(", bn_fold={}", quant::to_string(bn_fold));
  if (activation_bits) extra += fmt::format(", activation_bits={}", *activation_bits);
  if (observer != d.observer) extra += fmt::format(", observer={}", quant::to_string(observer));
  if (percentile != d.percentile) extra += fmt::format(", percentile={}", percentile);
  if (scale_init != d.scale_init) extra += fmt::format(", scale_init={}", quant::to_string(scale_init));
  if (learn_zero_point != d.learn_zero_point) extra += ", learn_zero_point=true";
  return fmt::format("QConfig(bits={}, scheme={}, formula={}, per_layer={}, momentum={}, ste={}{})", bits,
                     quant::to_string(scheme), quant::to_string(formula), per_layer, momentum, quant::to_string(ste),
                     extra);
}

std::string_view to_string(Scheme s) { return s == Scheme::Symmetric ? "symmetric" : "affine"; }
std::string_view to_string(Formula f) { return f == Formula::Google ? "google" : "cambricon"; }
std::string_view to_string(Ste s) { return s == Ste::Pure ? "pure" : "clipped"; }
std::string_view to_string(BnFold f) { return f == BnFold::Batch ? "batch" : "running"; }

namespace {
constexpr std::pair<ObserverKind, std::string_view> kObserverNames[] = {
    {ObserverKind::MovingAverage, "moving_average"}, {ObserverKind::MinMax, "minmax"},
    {ObserverKind::Lsq, "lsq"},                      {ObserverKind::Tqt, "tqt"},
    {ObserverKind::Histogram, "histogram"},          {ObserverKind::Percentile, "percentile"},
    {ObserverKind::Mse, "mse"}};
}  // namespace

std::string_view to_string(ObserverKind k) {
  for (const auto& [kind, name] : kObserverNames)
    if (kind == k) return name;
  return "?";
}

std::string_view to_string(ScaleInit i) { return i == ScaleInit::Lsq ? "lsq" : "range"; }

bool learns_scale(ObserverKind k) { return k == ObserverKind::Lsq || k == ObserverKind::Tqt; }

Scheme parse_scheme(std::string_view text) {
  if (text == "symmetric") return Scheme::Symmetric;
  if (text == "affine") return Scheme::Affine;
  QFLOW_FAIL("QConfig: unknown scheme '{}' (expected symmetric or affine)", text);
}

Formula parse_formula(std::string_view text) {
  if (text == "google") return Formula::Google;
  if (text == "cambricon") return Formula::Cambricon;
  QFLOW_FAIL("QConfig: unknown formula '{}' (expected google or cambricon)", text);
}

Ste parse_ste(std::string_view text) {
  if (text == "pure") return Ste::Pure;
  if (text == "clipped") return Ste::Clipped;
  QFLOW_FAIL("QConfig: unknown ste '{}' (expected pure or clipped)", text);
}

BnFold parse_bn_fold(std::string_view text) {
  if (text == "batch") return BnFold::Batch;
  if (text == "running") return BnFold::Running;
  QFLOW_FAIL("QConfig: unknown bn_fold '{}' (expected batch or running)", text);
}

ObserverKind parse_observer(std::string_view text) {
  for (const auto& [kind, name] : kObserverNames)
    if (name == text) return kind;
  QFLOW_FAIL("QConfig: unknown observer '{}' (expected moving_average, minmax, lsq, tqt, histogram, percentile or mse)",
             text);
}

ScaleInit parse_scale_init(std::string_view text) {
  if (text == "lsq") return ScaleInit::Lsq;
  if (text == "range") return ScaleInit::Range;
  QFLOW_FAIL("QConfig: unknown scale_init '{}' (expected lsq or range)", text);
}

}  // namespace qflow::quant
