// Histogram observers (Note [Histogram observers]): the L2-optimal range against PyTorch's
// HistogramObserver search on hand-built histograms; percentile and MSE ranges on
// hand-computed cases; recording, widening, state_dict and the observers a QConfig selects.
#include <numeric>

#include "qflow/quant/histogram_observer.h"
#include "qflow/quant/learned_quantizer.h"
#include "quant/learned_scales_golden.inc"
#include "quant/quant_test_util.h"

using namespace qflow;
using namespace qflow::quant;
using quant_test::values;
using quant_test::vec;
using ::testing::HasSubstr;

namespace {

Histogram histogram_of(const std::vector<float>& counts, double lo, double hi) {
  return {std::vector<double>(counts.begin(), counts.end()), lo, hi};
}

}  // namespace

// tests/golden/quant_learned_scales.py: PyTorch's _non_linear_param_search on the same
// histograms (quint8: 256 destination bins). The same bins on the bell and the one-sided case;
// on the 2048-bin case, whose error is flat near its minimum, PyTorch's float32 arithmetic picks
// its stopping bin by rounding (qflow computes in float64): within 1 % of the histogram's width.
TEST(HistogramObserverTest, L2RangeMatchesPyTorch) {
  struct Case {
    const char* name;
    const std::vector<float>& counts;
    float lo, hi;
    double want_lo, want_hi, tolerance;
  };
  for (const Case& c : {Case{"bell", golden::kBellCounts, golden::kBellMin, golden::kBellMax, golden::kBellChosenMin,
                             golden::kBellChosenMax, 1e-6},
                        Case{"relu", golden::kReluCounts, golden::kReluMin, golden::kReluMax, golden::kReluChosenMin,
                             golden::kReluChosenMax, 1e-6},
                        Case{"wide", golden::kWideCounts, golden::kWideMin, golden::kWideMax, golden::kWideChosenMin,
                             golden::kWideChosenMax, 0.01 * (golden::kWideMax - golden::kWideMin)}}) {
    const auto [lo, hi] = histogram_l2_range(histogram_of(c.counts, c.lo, c.hi), 256);
    EXPECT_NEAR(lo, c.want_lo, c.tolerance) << c.name;
    EXPECT_NEAR(hi, c.want_hi, c.tolerance) << c.name;
    EXPECT_LT(hi - lo, c.hi - c.lo) << c.name;  // every case clips something
  }
}

// Counts 1, 2, 3, 4 over [0, 4): 10 values. The 10th percentile (1 value) ends bin 0 at 1.0;
// the 90th (9 values) lies 3/4 into bin 3 (6 below it, 4 in it): 3.75.
TEST(HistogramObserverTest, PercentileRangeByHand) {
  const Histogram h = histogram_of({1, 2, 3, 4}, 0.0, 4.0);
  EXPECT_EQ(histogram_percentile_range(h, 90.0), (std::pair<double, double>{1.0, 3.75}));
  EXPECT_EQ(histogram_percentile_range(h, 100.0), (std::pair<double, double>{0.0, 4.0}));
  EXPECT_THAT(quant_test::error_of([&] { histogram_percentile_range(h, 40.0); }), HasSubstr("(50, 100]"));
}

// Bin centres -3, -1, 1, 3 with counts 0, 100, 100, 1; 2-bit symmetric grid [-2, 1]. The full
// range (s = 4) rounds ±1 to 0 and 3 to 4: error 201. α = 0.25 (s = 1) keeps ±1 exact and
// clips 3 to 1: error 4; α = 0.26 (s = 1.04): 200·0.04² + 1.96² = 4.16; smaller α lose more on
// ±1. So [-1, 1].
TEST(HistogramObserverTest, MseRangeByHand) {
  const Histogram h = histogram_of({0, 100, 100, 1}, -4.0, 4.0);
  const auto [lo, hi] = histogram_mse_range(h, {.bits = 2, .observer = ObserverKind::Mse});
  EXPECT_DOUBLE_EQ(lo, -1.0);
  EXPECT_DOUBLE_EQ(hi, 1.0);
  // A single value at the centre 3, 8 bits: the full range (s = 4/127) rounds it to 95·s =
  // 2.992; α = 0.75 (s = 3/127) puts it on the grid's last point, and every α = k/100 below
  // clips it.
  const auto [lo1, hi1] = histogram_mse_range(histogram_of({0, 0, 0, 5}, -4.0, 4.0), {.bits = 8, .observer = ObserverKind::Mse});
  EXPECT_DOUBLE_EQ(lo1, -3.0);
  EXPECT_DOUBLE_EQ(hi1, 3.0);
}

// Recording: the first tensor's range, one count per value; a wider tensor moves the old
// counts (none lost) and widens the range; the chosen range lands in min_val/max_val and the
// histogram in state_dict, so a loaded observer continues where the saved one stopped.
TEST(HistogramObserverTest, RecordsWidensAndRoundTrips) {
  HistogramObserver obs({.qconfig = {.observer = ObserverKind::Percentile, .percentile = 100.0}});
  obs.train();
  std::vector<float> first;
  for (int i = 0; i < 100; ++i) first.push_back(static_cast<float>(i) / 100.0f);  // [0, 0.99]
  obs(vec(first));
  Histogram h = obs.histogram();
  EXPECT_EQ(h.min, 0.0);
  EXPECT_FLOAT_EQ(static_cast<float>(h.max), 0.99f);
  EXPECT_DOUBLE_EQ(std::accumulate(h.counts.begin(), h.counts.end(), 0.0), 100.0);
  EXPECT_FLOAT_EQ(obs.max_val().item<float>(), 0.99f);  // percentile 100: the whole range
  obs(vec({-2.0f, 3.0f}));
  h = obs.histogram();
  EXPECT_EQ(h.min, -2.0);
  EXPECT_EQ(h.max, 3.0);
  EXPECT_NEAR(std::accumulate(h.counts.begin(), h.counts.end(), 0.0), 102.0, 1e-6);
  EXPECT_EQ(obs.num_observations(), 2);
  EXPECT_EQ(obs.min_val().item<float>(), -2.0f);

  HistogramObserver loaded({.qconfig = {.observer = ObserverKind::Percentile, .percentile = 100.0}});
  loaded.load_state_dict(obs.state_dict());
  EXPECT_EQ(loaded.histogram().counts, h.counts);
  EXPECT_EQ(values(loaded.calculate_qparams().scale), values(obs.calculate_qparams().scale));
  EXPECT_EQ(obs.repr(), "HistogramObserver(bits=8, scheme=symmetric, formula=google, bins=2048, percentile=100)");
  // Eval mode records nothing.
  obs.eval();
  obs(vec({-50.0f}));
  EXPECT_EQ(obs.num_observations(), 2);
}

// A percentile observer clips a rare outlier that min/max keeps.
TEST(HistogramObserverTest, PercentileClipsOutliers) {
  HistogramObserver obs({.qconfig = {.observer = ObserverKind::Percentile, .percentile = 99.0}});
  obs.train();
  manual_seed(4);
  Tensor x = randn({10000});
  {
    NoGradGuard no_grad;
    x.narrow(0, 0, 1).fill_(40.0);
  }
  obs(x);
  EXPECT_LT(obs.max_val().item<float>(), 3.0f);
  EXPECT_GT(obs.max_val().item<float>(), 2.0f);  // the 99th percentile of N(0, 1): 2.33
}

// The observers each QConfig::observer gives a Q module's input and weight.
TEST(HistogramObserverTest, QConfigSelectsTheObservers) {
  const auto type_of = [](const std::shared_ptr<Observer>& o) { return o->module().type_name(); };
  EXPECT_EQ(type_of(make_input_observer({})), "MovingAverageMinMaxObserver");
  EXPECT_EQ(type_of(make_weight_observer({}, 4)), "MinMaxObserver");
  auto minmax = make_input_observer({.observer = ObserverKind::MinMax});
  EXPECT_EQ(type_of(minmax), "MinMaxObserver");
  minmax->module().train();
  minmax->module()(vec({-1.0f, 2.0f}));
  minmax->module()(vec({0.5f, 1.0f}));
  EXPECT_EQ(minmax->min_val().item<float>(), -1.0f);  // the widest range since the start
  EXPECT_EQ(minmax->max_val().item<float>(), 2.0f);
  for (ObserverKind k : {ObserverKind::Histogram, ObserverKind::Percentile, ObserverKind::Mse}) {
    EXPECT_EQ(type_of(make_input_observer({.observer = k})), "HistogramObserver");
    EXPECT_EQ(type_of(make_weight_observer({.observer = k}, 0)), "MinMaxObserver");
  }
  EXPECT_EQ(type_of(make_input_observer({.observer = ObserverKind::Lsq})), "LsqQuantizer");
  EXPECT_EQ(type_of(make_weight_observer({.observer = ObserverKind::Tqt}, 3)), "TqtQuantizer");
}
