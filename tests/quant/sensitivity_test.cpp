// Sensitivity analysis and the mixed-precision choice (Note [Sensitivity analysis]) against a
// metric whose every value is known by hand: each quantized layer costs a fixed penalty, larger
// at 4 bits than at 8, so the ranking, the binary search's probes and the chosen layers can be
// written down in advance.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "error_of.h"
#include "qflow/quant/sensitivity.h"

using namespace qflow;
using namespace qflow::quant;
using qflow::testing_util::error_of;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace {

// LeNet-5's quantizable layers.
const std::map<std::string, std::string> kLayers{
    {"conv1", "Conv2d"}, {"conv2", "Conv2d"}, {"fc1", "Linear"}, {"fc2", "Linear"}, {"fc3", "Linear"}};
const std::map<std::string, double> kPenalty4{{"conv1", 3.0}, {"conv2", 0.5}, {"fc1", 1.0}, {"fc2", 0.2}, {"fc3", 2.0}};
constexpr double kPenalty8 = 0.05;
constexpr double kFloat = 90.0;
const QConfig kW4A8{.bits = 4, .activation_bits = 8};

// 90 minus each quantized layer's penalty; counts its calls.
struct PenaltyMetric {
  int calls = 0;
  double operator()(const QConfigMapping& m) {
    ++calls;
    double v = kFloat;
    for (const auto& [path, type] : kLayers)
      if (const auto qc = m.resolve(path, type)) v -= qc->bits <= 4 ? kPenalty4.at(path) : kPenalty8;
    return v;
  }
};

}  // namespace

TEST(SensitivityTest, EachLayerAloneRankedByItsDrop) {
  PenaltyMetric metric;
  std::vector<std::string> order;
  const SensitivityReport r = layer_sensitivity(
      kLayers, QConfigMapping(kW4A8), kFloat, std::ref(metric),
      [&](size_t i, size_t n, const std::string& path) { order.push_back(fmt::format("{}/{} {}", i, n, path)); });
  EXPECT_EQ(metric.calls, 5);
  EXPECT_THAT(order, ElementsAre("0/5 conv1", "1/5 conv2", "2/5 fc1", "3/5 fc2", "4/5 fc3"));
  ASSERT_EQ(r.layers.size(), 5u);
  std::vector<std::string> ranked;
  for (const LayerSensitivity& l : r.layers) ranked.push_back(l.path);
  EXPECT_THAT(ranked, ElementsAre("conv1", "fc3", "fc1", "conv2", "fc2"));
  EXPECT_NEAR(r.layers[0].drop, 3.0, 1e-12);
  EXPECT_NEAR(r.layers[0].metric, 87.0, 1e-12);
  EXPECT_EQ(r.layers[0].qconfig, kW4A8);
  EXPECT_EQ(r.layers[1].type, "Linear");
  EXPECT_NEAR(r.layers[4].drop, 0.2, 1e-12);
  EXPECT_THAT(r.to_csv(), HasSubstr("rank,path,type,qconfig,metric,drop\n1,conv1,Conv2d,\"QConfig(bits=4, "));
  EXPECT_THAT(r.to_csv(), HasSubstr("activation_bits=8)\",87.0000,3.0000\n2,fc3,Linear,"));
  EXPECT_THAT(r.table(2), HasSubstr("   1  conv1  Conv2d   W4A8      87.00     3.00\n"));
  EXPECT_THAT(r.table(2), HasSubstr("(3 more layers, each dropping at most 1.00)"));
}

TEST(SensitivityTest, LayersTheTargetLeavesFloatAreNotMeasured) {
  PenaltyMetric metric;
  QConfigMapping target(kW4A8);
  target.set_path("fc3", std::nullopt);
  const SensitivityReport r = layer_sensitivity(kLayers, target, kFloat, std::ref(metric));
  EXPECT_EQ(r.layers.size(), 4u);
  EXPECT_EQ(metric.calls, 4);
  EXPECT_THAT(error_of([&] { layer_sensitivity(kLayers, QConfigMapping(std::nullopt), kFloat, std::ref(metric)); }),
              HasSubstr("layer_sensitivity: the mapping {\"global\":\"none\",\"rules\":[]} quantizes none of the "
                        "model's 5 layers"));
}

// Drops by hand: k = 0 (all 4-bit) 6.7; k = 5 (all 8-bit) 0.25; k = 2 (conv1, fc3 raised)
// 0.5 + 1.0 + 0.2 + 2 x 0.05 = 1.8; k = 3 (fc1 too) 0.5 + 0.2 + 3 x 0.05 = 0.85.
TEST(SensitivityTest, MixedPrecisionRaisesTheFewestMostSensitiveLayers) {
  PenaltyMetric metric;
  const QConfigMapping target(kW4A8);
  const SensitivityReport r = layer_sensitivity(kLayers, target, kFloat, std::ref(metric));
  metric.calls = 0;
  const MixedPrecision mp = choose_mixed_precision(r, target, 8, 1.0, std::ref(metric));
  EXPECT_THAT(mp.raised, ElementsAre("conv1", "fc3", "fc1"));
  EXPECT_TRUE(mp.within);
  EXPECT_NEAR(mp.drop, 0.85, 1e-12);
  EXPECT_NEAR(mp.metric, 89.15, 1e-12);
  ASSERT_EQ(mp.trials.size(), 4u);  // k = 0, 5, then the binary search: 2, 3
  EXPECT_EQ(mp.trials[0].raised, 0u);
  EXPECT_NEAR(mp.trials[0].drop, 6.7, 1e-12);
  EXPECT_EQ(mp.trials[1].raised, 5u);
  EXPECT_NEAR(mp.trials[1].drop, 0.25, 1e-12);
  EXPECT_EQ(mp.trials[2].raised, 2u);
  EXPECT_NEAR(mp.trials[2].drop, 1.8, 1e-12);
  EXPECT_EQ(mp.trials[3].raised, 3u);
  EXPECT_EQ(metric.calls, 4);
  // The raised layers are W8A8, the others stay W4A8; the JSON is a --qconfig file.
  const QConfig w8a8{.bits = 8, .activation_bits = 8};
  EXPECT_EQ(mp.mapping.resolve("conv1", "Conv2d"), w8a8);
  EXPECT_EQ(mp.mapping.resolve("fc1", "Linear"), w8a8);
  EXPECT_EQ(mp.mapping.resolve("conv2", "Conv2d"), kW4A8);
  EXPECT_EQ(QConfigMapping::from_json(mp.mapping.to_json()), mp.mapping);
  EXPECT_EQ(mp.to_string(8, 1.0),
            "kept 3 layers at 8 bits (conv1, fc3, fc1): metric 89.15, drop 0.85 <= 1");
}

TEST(SensitivityTest, MixedPrecisionWhenNothingOrEverythingIsEnough) {
  PenaltyMetric metric;
  const QConfigMapping target(kW4A8);
  const SensitivityReport r = layer_sensitivity(kLayers, target, kFloat, std::ref(metric));
  const MixedPrecision loose = choose_mixed_precision(r, target, 8, 10.0, std::ref(metric));
  EXPECT_TRUE(loose.raised.empty());
  EXPECT_EQ(loose.trials.size(), 1u);
  EXPECT_EQ(loose.mapping, target);
  const MixedPrecision strict = choose_mixed_precision(r, target, 8, 0.1, std::ref(metric));
  EXPECT_FALSE(strict.within);
  EXPECT_EQ(strict.raised.size(), 5u);
  EXPECT_EQ(strict.trials.size(), 2u);
  EXPECT_THAT(strict.to_string(8, 0.1), HasSubstr("drop 0.25 > 0.1 (even with every layer raised"));
  EXPECT_THAT(error_of([&] { choose_mixed_precision(r, target, 1, 1.0, std::ref(metric)); }),
              HasSubstr("high bits must be in 2..16, got 1"));
  EXPECT_THAT(error_of([&] { choose_mixed_precision(r, target, 8, -1.0, std::ref(metric)); }),
              HasSubstr("the accuracy drop allowed must be >= 0, got -1"));
}

// A raised layer's own path rule replaces the one the target had; other rules are kept in order.
TEST(SensitivityTest, RaisingReplacesTheLayersOwnPathRuleAndKeepsTheOthers) {
  PenaltyMetric metric;
  QConfigMapping target(kW4A8);
  target.set_path("conv1", QConfig{.bits = 3, .activation_bits = 8}).set_type("Linear", kW4A8).set_path_regex("fc[23]", kW4A8);
  const SensitivityReport r = layer_sensitivity(kLayers, target, kFloat, std::ref(metric));
  EXPECT_EQ(r.layers[0].path, "conv1");
  EXPECT_EQ(r.layers[0].qconfig.bits, 3);
  const QConfigMapping raised = raise_layers(r, target, 1, 8);
  ASSERT_EQ(raised.rules().size(), 3u);
  EXPECT_EQ(raised.rules()[0].kind, RuleKind::Type);
  EXPECT_EQ(raised.rules()[1].kind, RuleKind::PathRegex);
  EXPECT_EQ(raised.rules()[2], (QConfigRule{RuleKind::Path, "conv1", QConfig{.bits = 8, .activation_bits = 8}}));
  EXPECT_THAT(error_of([&] { raise_layers(r, target, 6, 8); }), HasSubstr("6 layers asked, the report has 5"));
}
