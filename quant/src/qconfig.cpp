#include "qflow/quant/qconfig.h"

#include <cmath>

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
  return fmt::format("QConfig(bits={}, scheme={}, formula={}, per_layer={}, momentum={}, ste={}{}{})", bits,
                     quant::to_string(scheme), quant::to_string(formula), per_layer, momentum, quant::to_string(ste),
                     bn_fold == QConfig{}.bn_fold ? "" : fmt::format(", bn_fold={}", quant::to_string(bn_fold)),
                     activation_bits ? fmt::format(", activation_bits={}", *activation_bits) : "");
}

std::string_view to_string(Scheme s) { return s == Scheme::Symmetric ? "symmetric" : "affine"; }
std::string_view to_string(Formula f) { return f == Formula::Google ? "google" : "cambricon"; }
std::string_view to_string(Ste s) { return s == Ste::Pure ? "pure" : "clipped"; }
std::string_view to_string(BnFold f) { return f == BnFold::Batch ? "batch" : "running"; }

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

}  // namespace qflow::quant
