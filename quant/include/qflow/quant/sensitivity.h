#pragma once
// Sensitivity analysis and mixed precision: which layers cost the accuracy when quantized, and
// which to keep at more bits to stay within an accuracy drop.
//
//   const auto layers = quant::quantizable_layers(*float_gm);
//   quant::MappingMetric accuracy = [&](const quant::QConfigMapping& m) {  // PTQ, calibrate, evaluate
//     auto ptq = quant::prepare_ptq(*float_gm, example, m);
//     quant::calibrate(*ptq, calibration_batches);
//     return test_accuracy(*ptq);
//   };
//   quant::SensitivityReport r = quant::layer_sensitivity(layers, w4a8, float_accuracy, accuracy);
//   fmt::print("{}", r.table(10));
//   quant::MixedPrecision mp = quant::choose_mixed_precision(r, w4a8, 8, 1.0, accuracy);
//   write(mp.mapping.to_json());   // a --qconfig file
//
// Note [Sensitivity analysis]
// One layer at a time: for every layer the target mapping quantizes, the model is evaluated
// with that layer alone quantized (its target QConfig) and every other layer float; its drop
// is the float model's metric minus that one. The metric is the caller's (qflow-train: PTQ,
// calibrated on fixed training batches, top-1 accuracy on N test images) — post-training, not
// QAT, because one training run per layer would cost the whole budget; a layer that loses a lot
// without training is the one QAT struggles with too. Layers are ranked by drop, largest first
// (ties: graph path order, so the ranking is deterministic). The drops do not add up to the
// drop of the whole quantized model (errors interact), which is why the mixed-precision choice
// measures the combinations it considers instead of summing.
//
// Mixed precision: with the k most sensitive layers raised to `high_bits` (their target
// QConfig with bits = high_bits, activation_bits kept) and the rest at their target, the metric
// is treated as non-decreasing in k. The choice is the smallest k whose drop from the float
// metric is at most max_drop: k = 0 (the target as given) is measured first, then k = n (every
// layer raised; if even that misses, the result says so and keeps k = n), then a binary search
// in between — about log2(n) + 2 evaluations instead of n. Every evaluation is recorded in
// `trials`, so a non-monotone model shows itself. The resulting mapping is the target's with
// one path rule per raised layer (replacing a path rule the target had for that exact path).
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "qflow/quant/qconfig_mapping.h"

namespace qflow::quant {

/// The quality of the model a mapping describes (higher is better: accuracy in %).
using MappingMetric = std::function<double(const QConfigMapping&)>;

struct LayerSensitivity {
  std::string path;  // "layer1.0.conv1"
  std::string type;  // the float layer's type: "Conv2d", "Linear"
  QConfig qconfig;   // the target QConfig it was measured at
  double metric = 0;  // with this layer alone quantized
  double drop = 0;    // reference - metric
};

struct SensitivityReport {
  double reference = 0;                 // the float model's metric
  std::vector<LayerSensitivity> layers;  // largest drop first
  /// Header rank,path,type,qconfig,metric,drop, then one line per layer.
  std::string to_csv() const;
  /// The first `n` layers (all when n = 0) as an aligned text table.
  std::string table(size_t n = 0) const;
};

/// One evaluation of the mixed-precision search.
struct MixedPrecisionTrial {
  size_t raised = 0;  // the k most sensitive layers at high bits
  double metric = 0;
  double drop = 0;
};

struct MixedPrecision {
  QConfigMapping mapping{std::nullopt};  // the target with the raised layers' path rules
  std::vector<std::string> raised;       // paths, most sensitive first
  double metric = 0, drop = 0;           // of `mapping`
  bool within = false;                   // drop <= max_drop
  std::vector<MixedPrecisionTrial> trials;  // in the order they ran
  /// "kept 3 of 21 layers at 8 bits (conv1, layer4.1.conv2, fc): accuracy 88.10 %, drop 0.72 <= 1"
  std::string to_string(int64_t high_bits, double max_drop) const;
};

/// Measures every layer of `layers` (dotted path -> float type, quant::quantizable_layers) that
/// `target` quantizes, alone (Note [Sensitivity analysis]); `reference` is the float model's
/// metric. Throws when `target` quantizes none of them. `progress(i, n, path)`, when given, is
/// called before each evaluation.
SensitivityReport layer_sensitivity(const std::map<std::string, std::string>& layers, const QConfigMapping& target,
                                    double reference, const MappingMetric& metric,
                                    const std::function<void(size_t, size_t, const std::string&)>& progress = {});

/// `target` with the `k` most sensitive layers of `report` raised to `high_bits`.
QConfigMapping raise_layers(const SensitivityReport& report, const QConfigMapping& target, size_t k,
                            int64_t high_bits);

/// The fewest most-sensitive layers to raise to `high_bits` so that the metric drops at most
/// `max_drop` below report.reference (Note [Sensitivity analysis]). Throws for high_bits outside
/// 2..16 or a negative max_drop.
MixedPrecision choose_mixed_precision(const SensitivityReport& report, const QConfigMapping& target, int64_t high_bits,
                                      double max_drop, const MappingMetric& metric);

}  // namespace qflow::quant
