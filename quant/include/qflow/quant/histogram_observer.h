#pragma once
// Post-training observers that keep a histogram of everything they see and choose the range
// from it: the L2-optimal range (PyTorch's HistogramObserver), a percentile range, or the
// clipping that minimises the squared error of the QConfig's own grid.
//
// Note [Histogram observers]
// Recording: the first tensor sets the histogram's range [min, max] (2048 bins, float32
// counts); a later tensor reaching outside it widens the range to cover both, and the old
// counts move to the new bins in proportion to how much of each old bin a new bin overlaps
// (the old counts taken as uniform inside their bins — what PyTorch's upsample-and-downsample
// does in the limit; PyTorch 1.13 also truncates its histc bounds to integers, which this
// does not copy). Then the tensor's values are counted. After each record the chosen range
// is stored in min_val/max_val, so calculate_qparams, state_dict, the deploy pass and the
// ONNX export work as for any observer (the histogram is a buffer too: calibration resumes).
// Choosing, by QConfig::observer:
//   histogram   PyTorch's _non_linear_param_search, ported line by line (an approximation of
//               the L2 error over the histogram for 2^bits destination bins, narrowing from
//               the side with less mass in steps of 1e-5 of the total until the error
//               grows) — histogram_l2_range;
//   percentile  [the (100 − p)th, the pth] percentile, interpolated linearly inside the bin
//               that crosses it — histogram_percentile_range;
//   mse         the range [α·min, α·max] (symmetric: ±α·max|x|; both widened to include 0
//               as Note [Quantization numerics] does) for α = 1/100 ... 100/100 whose fake
//               quantization with this QConfig's grid has the least squared error over the
//               bin centres, weighted by their counts; ties go to the wider range —
//               histogram_mse_range.
// Per tensor only (activations); the observer a QConfig with these kinds gives a weight is a
// MinMaxObserver (a weight is known exactly; QAT, not calibration, is what trains weights to
// a narrower grid). Data parallel: the tensor's range is synchronised before counting and the
// chosen range after, so replicas agree. On a GPU the counting and the choice run on the host
// (Note [Histogram observers on a device]).
#include <utility>
#include <vector>

#include "qflow/quant/observer.h"

namespace qflow::quant {

/// Counts over [min, max] in equal bins.
struct Histogram {
  std::vector<double> counts;
  double min = 0.0, max = 0.0;
};

/// PyTorch's HistogramObserver._non_linear_param_search for `dst_bins` (2^bits) destination
/// bins: the chosen (min, max).
std::pair<double, double> histogram_l2_range(const Histogram& h, int64_t dst_bins);
/// The ((100 − p)th, pth) percentiles of the histogram's values, p in (50, 100].
std::pair<double, double> histogram_percentile_range(const Histogram& h, double percentile);
/// The least-squared-error clipping of Note [Histogram observers] for `qconfig`'s grid.
std::pair<double, double> histogram_mse_range(const Histogram& h, const QConfig& qconfig);

/// Buffers: min_val, max_val (the chosen range, (1)), num_batches_tracked, frozen, histogram
/// ((bins) float32), histogram_min, histogram_max ((1)).
class HistogramObserver : public nn::Cloneable<HistogramObserver>, public Observer {
 public:
  static constexpr int64_t kBins = 2048;
  /// The selection is options.qconfig.observer (histogram, percentile or mse).
  explicit HistogramObserver(ObserverOptions options = {});
  void reset();
  /// Counts x's values when training and not frozen, then stores the chosen range; returns x.
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  /// The recorded histogram.
  Histogram histogram() const;

 private:
  Tensor histogram_, histogram_min_, histogram_max_;
};

}  // namespace qflow::quant
