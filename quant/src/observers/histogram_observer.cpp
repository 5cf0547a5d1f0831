// Histogram-based post-training observers: Note [Histogram observers] in histogram_observer.h.
#include "qflow/quant/histogram_observer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "qflow/autograd/grad_mode.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"

namespace qflow::quant {
namespace {

double cube(double v) { return v * v * v; }

// PyTorch's _get_norm: density · ∫_begin^end x² dx.
double l2_norm(double begin, double end, double density) { return density * (cube(end) - cube(begin)) / 3.0; }

// PyTorch's _compute_quantization_error for the destination range [start_bin, end_bin].
double quantization_error(const Histogram& h, int64_t start_bin, int64_t end_bin, int64_t dst_bins) {
  const int64_t bins = static_cast<int64_t>(h.counts.size());
  const double bin_width = (h.max - h.min) / static_cast<double>(bins);
  const double dst_width = bin_width * static_cast<double>(end_bin - start_bin + 1) / static_cast<double>(dst_bins);
  if (dst_width == 0.0) return 0.0;
  const double last = static_cast<double>(dst_bins - 1);
  double norm = 0.0;
  for (int64_t i = 0; i < bins; ++i) {
    const double begin = static_cast<double>(i - start_bin) * bin_width;
    const double end = begin + bin_width;
    const double dst_begin = std::clamp(std::floor(begin / dst_width), 0.0, last);
    const double dst_end = std::clamp(std::floor(end / dst_width), 0.0, last);
    const double density = h.counts[static_cast<size_t>(i)] / bin_width;
    norm += l2_norm(begin - (dst_begin + 0.5) * dst_width, dst_width / 2, density);
    norm += (dst_end - dst_begin - 1) * l2_norm(-dst_width / 2, dst_width / 2, density);
    norm += l2_norm(-dst_width / 2, end - (dst_end * dst_width + dst_width / 2), density);
  }
  return norm;
}

// Adds `n` counts spread uniformly over [a, b) (positions in bins of `h`) into h.counts.
void spread(std::vector<double>& counts, double a, double b, double n) {
  const int64_t bins = static_cast<int64_t>(counts.size());
  if (b <= a) {
    counts[static_cast<size_t>(std::clamp<int64_t>(static_cast<int64_t>(std::floor(a)), 0, bins - 1))] += n;
    return;
  }
  for (int64_t j = std::max<int64_t>(0, static_cast<int64_t>(std::floor(a))); j < bins && static_cast<double>(j) < b; ++j) {
    const double overlap = std::min(b, static_cast<double>(j + 1)) - std::max(a, static_cast<double>(j));
    if (overlap > 0) counts[static_cast<size_t>(j)] += n * overlap / (b - a);
  }
}

// Fake quantization of one value with (scale, zero_point) on `qc`'s grid (the kernel's formula).
double fake_quantize_value(double x, float scale, float zero_point, const QConfig& qc) {
  if (scale == 0.0f) return x;
  const double q = std::clamp(static_cast<double>(std::nearbyint(static_cast<float>(x) / scale + zero_point)),
                              static_cast<double>(qc.quant_min()), static_cast<double>(qc.quant_max()));
  return (q - zero_point) * scale;
}

}  // namespace

std::pair<double, double> histogram_l2_range(const Histogram& h, int64_t dst_bins) {
  const int64_t bins = static_cast<int64_t>(h.counts.size());
  QFLOW_CHECK(bins > 0 && dst_bins > 0, "histogram_l2_range: expected a non-empty histogram and destination bins, got {} and {}",
              bins, dst_bins);
  const double bin_width = (h.max - h.min) / static_cast<double>(bins);
  std::vector<double> csum(h.counts.size());
  std::partial_sum(h.counts.begin(), h.counts.end(), csum.begin());
  const double total = csum.back();
  constexpr double kStep = 1e-5;
  double alpha = 0.0, beta = 1.0, norm_min = std::numeric_limits<double>::infinity();
  int64_t start_bin = 0, end_bin = bins - 1;
  while (alpha < beta) {
    const double next_alpha = alpha + kStep, next_beta = beta - kStep;
    int64_t l = start_bin, r = end_bin;
    while (l < end_bin && csum[static_cast<size_t>(l)] < next_alpha * total) ++l;
    while (r > start_bin && csum[static_cast<size_t>(r)] > next_beta * total) --r;
    int64_t next_start = start_bin, next_end = end_bin;
    if (l - start_bin > end_bin - r) {
      next_start = l;
      alpha = next_alpha;
    } else {
      next_end = r;
      beta = next_beta;
    }
    if (next_start == start_bin && next_end == end_bin) continue;
    const double norm = quantization_error(h, next_start, next_end, dst_bins);
    if (norm > norm_min) break;
    norm_min = norm;
    start_bin = next_start;
    end_bin = next_end;
  }
  return {h.min + bin_width * static_cast<double>(start_bin), h.min + bin_width * static_cast<double>(end_bin + 1)};
}

std::pair<double, double> histogram_percentile_range(const Histogram& h, double percentile) {
  QFLOW_CHECK(percentile > 50.0 && percentile <= 100.0, "histogram_percentile_range: percentile must be in (50, 100], got {}",
              percentile);
  const double total = std::accumulate(h.counts.begin(), h.counts.end(), 0.0);
  const double width = (h.max - h.min) / static_cast<double>(h.counts.size());
  // The value below which `target` of the counts lie, linear inside the bin that crosses it.
  const auto value_at = [&](double target) {
    double below = 0.0;
    for (size_t i = 0; i < h.counts.size(); ++i) {
      const double c = h.counts[i];
      if (c > 0 && below + c >= target) return h.min + (static_cast<double>(i) + (target - below) / c) * width;
      below += c;
    }
    return h.max;
  };
  if (total == 0.0) return {h.min, h.max};
  const double lo = percentile == 100.0 ? h.min : value_at(total * (100.0 - percentile) / 100.0);
  const double hi = percentile == 100.0 ? h.max : value_at(total * percentile / 100.0);
  return {std::max(lo, h.min), std::min(hi, h.max)};
}

std::pair<double, double> histogram_mse_range(const Histogram& h, const QConfig& qconfig) {
  const double width = (h.max - h.min) / static_cast<double>(h.counts.size());
  const double lo = std::min(h.min, 0.0), hi = std::max(h.max, 0.0);
  const double absmax = std::max(-lo, hi);
  std::pair<double, double> best{lo, hi};
  double best_error = std::numeric_limits<double>::infinity();
  for (int k = 100; k >= 1; --k) {  // widest first: a tie keeps the wider range
    const double alpha = k / 100.0;
    const std::pair<double, double> range = qconfig.scheme == Scheme::Symmetric
                                                ? std::pair<double, double>{-alpha * absmax, alpha * absmax}
                                                : std::pair<double, double>{alpha * lo, alpha * hi};
    const auto [scale, zero_point] =
        range_qparams(static_cast<float>(range.first), static_cast<float>(range.second), qconfig);
    double error = 0.0;
    for (size_t i = 0; i < h.counts.size(); ++i) {
      if (h.counts[i] == 0) continue;
      const double centre = h.min + (static_cast<double>(i) + 0.5) * width;
      const double d = centre - fake_quantize_value(centre, scale, zero_point, qconfig);
      error += h.counts[i] * d * d;
    }
    if (error < best_error) {
      best_error = error;
      best = range;
    }
  }
  return best;
}

// ---- HistogramObserver -------------------------------------------------------------------------------

HistogramObserver::HistogramObserver(ObserverOptions options) : Observer(options) {
  QFLOW_CHECK(options.channels == 0, "HistogramObserver: only per-tensor ranges are supported, got channels={}",
              options.channels);
  reset();
}

void HistogramObserver::reset() {
  register_statistics(*this);
  histogram_ = register_buffer("histogram", zeros({kBins}));
  histogram_min_ = register_buffer("histogram_min", zeros({1}));
  histogram_max_ = register_buffer("histogram_max", zeros({1}));
}

Histogram HistogramObserver::histogram() const {
  const std::vector<float> c = to_vector<float>(histogram_);
  return {std::vector<double>(c.begin(), c.end()), histogram_min_.item<float>(), histogram_max_.item<float>()};
}

// Note [Histogram observers on a device]
// The histogram, its widening and the choice of the range (a sequential search over 2048
// bins) are host work: on a GPU each record reads the batch's range and the tensor back,
// counts on the CPU and writes the histogram and the chosen range back to the observer's
// device, explicitly. These observers calibrate (a few batches of qflow-train --ptq or
// --sensitivity, where one synchronisation per layer and batch costs little) and are not
// made for QAT steps or captured graphs, which read nothing back (Note [Observers stay on
// their device]). Since the host reads anyway, the frozen flag is read too: a frozen
// observer counts nothing on any device (store() alone would keep the range but not the
// histogram).
Tensor HistogramObserver::forward(const Tensor& x) {
  if (!is_training() || is_frozen()) return x;
  const Device device = min_val_.device();  // the statistics', where the chosen range goes
  QFLOW_CHECK(x.device() == device, "HistogramObserver: the observed tensor is on {} but the observer's statistics on {}",
              x.device(), device);
  const Range r = synchronized(tensor_range(x, false));
  Histogram h = histogram();
  const double lo = r.min.item<float>(), hi = r.max.item<float>();
  if (num_observations() == 0) {
    h = {std::vector<double>(kBins, 0.0), lo, hi};
  } else if (lo < h.min || hi > h.max) {  // widen: move the old counts to the new bins
    Histogram wider{std::vector<double>(kBins, 0.0), std::min(lo, h.min), std::max(hi, h.max)};
    const double new_width = (wider.max - wider.min) / kBins, old_width = (h.max - h.min) / kBins;
    for (int64_t i = 0; i < kBins; ++i) {
      if (h.counts[static_cast<size_t>(i)] == 0) continue;
      const double a = (h.min + static_cast<double>(i) * old_width - wider.min) / new_width;
      spread(wider.counts, a, a + old_width / new_width, h.counts[static_cast<size_t>(i)]);
    }
    h = std::move(wider);
  }
  {
    NoGradGuard no_grad;
    const std::vector<float> values = to_vector<float>(x.detach().to(Device::cpu()).to(DType::Float32).contiguous());
    const double width = (h.max - h.min) / kBins;
    for (float v : values) {
      const int64_t bin = width > 0 ? static_cast<int64_t>(std::floor((v - h.min) / width)) : 0;
      h.counts[static_cast<size_t>(std::clamp<int64_t>(bin, 0, kBins - 1))] += 1.0;
    }
  }
  std::pair<double, double> chosen{h.min, h.max};
  if (h.max > h.min) {
    switch (qconfig().observer) {
      case ObserverKind::Percentile: chosen = histogram_percentile_range(h, qconfig().percentile); break;
      case ObserverKind::Mse: chosen = histogram_mse_range(h, qconfig()); break;
      default: chosen = histogram_l2_range(h, int64_t{1} << qconfig().bits);
    }
  }
  {
    NoGradGuard no_grad;
    std::vector<float> counts(h.counts.begin(), h.counts.end());
    histogram_.copy_(from_vector<float>(counts, {kBins}).to(device));
    histogram_min_.fill_(h.min);
    histogram_max_.fill_(h.max);
  }
  const Range stored = synchronized({scalar_tensor(static_cast<float>(chosen.first), std::nullopt, device).reshape({1}),
                                     scalar_tensor(static_cast<float>(chosen.second), std::nullopt, device).reshape({1})});
  store(stored.min, stored.max);
  return x;
}

std::string HistogramObserver::extra_repr() const {
  const ObserverKind k = qconfig().observer;
  const std::string select = k == ObserverKind::Percentile ? fmt::format("percentile={}", qconfig().percentile)
                             : k == ObserverKind::Mse      ? std::string("select=mse")
                                                           : std::string("select=l2");
  return fmt::format("{}, bins={}, {}", describe(), kBins, select);
}

}  // namespace qflow::quant
