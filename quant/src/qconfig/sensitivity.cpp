#include "qflow/quant/sensitivity.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "qflow/core/error.h"

namespace qflow::quant {
namespace {

// The layer at `path` quantized with `qconfig`, everything else float.
QConfigMapping only(const std::string& path, const QConfig& qconfig) {
  QConfigMapping m(std::nullopt);
  m.set_path(path, qconfig);
  return m;
}

QConfig raised(QConfig qc, int64_t high_bits) {
  qc.bits = high_bits;
  return qc;
}

}  // namespace

std::string SensitivityReport::to_csv() const {
  std::string s = "rank,path,type,qconfig,metric,drop\n";
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerSensitivity& l = layers[i];
    s += fmt::format("{},{},{},\"{}\",{:.4f},{:.4f}\n", i + 1, l.path, l.type, l.qconfig.to_string(), l.metric, l.drop);
  }
  return s;
}

std::string SensitivityReport::table(size_t n) const {
  const size_t rows = n == 0 ? layers.size() : std::min(n, layers.size());
  size_t width = 5;
  for (size_t i = 0; i < rows; ++i) width = std::max(width, layers[i].path.size());
  std::string s = fmt::format("{:>4}  {:<{}}  {:<7}  {:>4}  {:>9}  {:>7}\n", "rank", "layer", width, "type", "bits",
                              "alone (%)", "drop");
  for (size_t i = 0; i < rows; ++i) {
    const LayerSensitivity& l = layers[i];
    const std::string bits = l.qconfig.activation_bits && *l.qconfig.activation_bits != l.qconfig.bits
                                 ? fmt::format("W{}A{}", l.qconfig.bits, *l.qconfig.activation_bits)
                                 : fmt::format("{}", l.qconfig.bits);
    s += fmt::format("{:>4}  {:<{}}  {:<7}  {:>4}  {:>9.2f}  {:>7.2f}\n", i + 1, l.path, width, l.type, bits, l.metric,
                     l.drop);
  }
  if (rows < layers.size()) s += fmt::format("({} more layers, each dropping at most {:.2f})\n", layers.size() - rows,
                                             layers[rows].drop);
  return s;
}

std::string MixedPrecision::to_string(int64_t high_bits, double max_drop) const {
  const std::string which = raised.empty() ? "" : fmt::format(" ({})", fmt::join(raised, ", "));
  return fmt::format("kept {} layer{} at {} bits{}: metric {:.2f}, drop {:.2f} {} {:g}{}", raised.size(),
                     raised.size() == 1 ? "" : "s", high_bits, which, metric, drop, within ? "<=" : ">", max_drop,
                     within ? "" : " (even with every layer raised the drop exceeds the limit)");
}

SensitivityReport layer_sensitivity(const std::map<std::string, std::string>& layers, const QConfigMapping& target,
                                    double reference, const MappingMetric& metric,
                                    const std::function<void(size_t, size_t, const std::string&)>& progress) {
  target.check_layers(layers, "layer_sensitivity");
  std::vector<LayerSensitivity> measured;
  for (const auto& [path, type] : layers)
    if (const std::optional<QConfig> qc = target.resolve(path, type)) measured.push_back({path, type, *qc});
  QFLOW_CHECK(!measured.empty(), "layer_sensitivity: the mapping {} quantizes none of the model's {} layers",
              target.to_json(), layers.size());
  for (size_t i = 0; i < measured.size(); ++i) {
    LayerSensitivity& l = measured[i];
    if (progress) progress(i, measured.size(), l.path);
    l.metric = metric(only(l.path, l.qconfig));
    l.drop = reference - l.metric;
  }
  // Largest drop first; equal drops keep the map's path order.
  std::stable_sort(measured.begin(), measured.end(),
                   [](const LayerSensitivity& a, const LayerSensitivity& b) { return a.drop > b.drop; });
  return {reference, std::move(measured)};
}

QConfigMapping raise_layers(const SensitivityReport& report, const QConfigMapping& target, size_t k,
                            int64_t high_bits) {
  QFLOW_CHECK(k <= report.layers.size(), "raise_layers: {} layers asked, the report has {}", k, report.layers.size());
  std::set<std::string> paths;
  for (size_t i = 0; i < k; ++i) paths.insert(report.layers[i].path);
  QConfigMapping m(target.global());
  for (const QConfigRule& r : target.rules()) {
    if (r.kind == RuleKind::Path && paths.count(r.pattern)) continue;  // replaced below
    if (r.kind == RuleKind::Type) m.set_type(r.pattern, r.qconfig);
    else if (r.kind == RuleKind::Path) m.set_path(r.pattern, r.qconfig);
    else m.set_path_regex(r.pattern, r.qconfig);
  }
  for (size_t i = 0; i < k; ++i) m.set_path(report.layers[i].path, raised(report.layers[i].qconfig, high_bits));
  m.validate();
  return m;
}

MixedPrecision choose_mixed_precision(const SensitivityReport& report, const QConfigMapping& target, int64_t high_bits,
                                      double max_drop, const MappingMetric& metric) {
  QFLOW_CHECK(high_bits >= 2 && high_bits <= 16, "choose_mixed_precision: high bits must be in 2..16, got {}",
              high_bits);
  QFLOW_CHECK(max_drop >= 0, "choose_mixed_precision: the accuracy drop allowed must be >= 0, got {}", max_drop);
  MixedPrecision result;
  std::map<size_t, double> measured;  // k -> metric
  const auto measure = [&](size_t k) {
    const double value = metric(raise_layers(report, target, k, high_bits));
    measured[k] = value;
    result.trials.push_back({k, value, report.reference - value});
    return report.reference - value <= max_drop;
  };
  const size_t n = report.layers.size();
  size_t chosen = 0;
  if (!measure(0)) {
    chosen = n;
    if (measure(n)) {
      // Invariant: lo fails, hi passes.
      size_t lo = 0, hi = n;
      while (hi - lo > 1) {
        const size_t mid = lo + (hi - lo) / 2;
        (measure(mid) ? hi : lo) = mid;
      }
      chosen = hi;
    }
  }
  result.mapping = raise_layers(report, target, chosen, high_bits);
  for (size_t i = 0; i < chosen; ++i) result.raised.push_back(report.layers[i].path);
  result.metric = measured.at(chosen);
  result.drop = report.reference - result.metric;
  result.within = result.drop <= max_drop;
  return result;
}

}  // namespace qflow::quant
