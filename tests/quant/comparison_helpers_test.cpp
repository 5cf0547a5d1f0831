// Negative controls of the quant tests' comparisons: quant_test::expect_close
// (quant_test_util.h), pass_test::expect_close_to_scale (pass_test_util.h) and
// compare_layer_inputs (layer_by_layer.h) each fail when a NaN or an Inf comes through.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <limits>

#include "quant/layer_by_layer.h"
#include "quant/pass_test_util.h"
#include "quant/trained_deploy.h"

using namespace qflow;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();

Tensor v(std::vector<float> x) { return quant_test::vec(std::move(x)); }

}  // namespace

TEST(QuantComparisonHelpersTest, ExpectCloseFailsOnNaNAndInfOnEitherSide) {
  quant_test::expect_close(v({1, 2}), v({1, 2}), 0);  // passes
  EXPECT_NONFATAL_FAILURE(quant_test::expect_close(v({1, kNaN}), v({1, 2}), 1, 1, "y"), "y element 1: got nan");
  EXPECT_NONFATAL_FAILURE(quant_test::expect_close(v({kInf, 2}), v({1, 2}), 1, 1), "element 0: got inf");
  // The references here are computed by qflow too: a NaN on both sides is no agreement.
  EXPECT_NONFATAL_FAILURE(quant_test::expect_close(v({kNaN, 2}), v({kNaN, 2}), 1, 1), "element 0");
}

TEST(QuantComparisonHelpersTest, ExpectCloseToScaleFailsOnNaNAndInf) {
  pass_test::expect_close_to_scale(v({1, 2}), v({1, 2.001f}), 1e-3);  // passes
  EXPECT_NONFATAL_FAILURE(pass_test::expect_close_to_scale(v({1, kNaN}), v({1, 2}), 1e-3), "got nan");
  EXPECT_NONFATAL_FAILURE(pass_test::expect_close_to_scale(v({1, kInf}), v({1, 2}), 1e-3), "got inf");
  // A NaN in the reference makes its scale NaN: no element passes.
  EXPECT_NONFATAL_FAILURE(pass_test::expect_close_to_scale(v({1}), v({kNaN}), 1e-3), "want nan");
}

TEST(QuantComparisonHelpersTest, LayerByLayerComparisonCountsNaNAsADifference) {
  const pass_test::ZooInput lenet = pass_test::integer_zoo()[2];
  ASSERT_EQ(lenet.model, "lenet5");
  auto deploy = pass_test::trained_deploy(lenet, quant::QConfig{});
  manual_seed(13);
  Tensor x = pass_test::zoo_batch(lenet, 2);
  x.view({-1}).narrow(0, 100, 1).fill_(kNaN);  // a NaN reaching the first layer's input
  const auto layers = pass_test::compare_layer_inputs(*deploy, x);
  ASSERT_FALSE(layers.empty());
  EXPECT_GT(layers[0].differ_by_more_than_one, 0) << layers[0].node;
  EXPECT_EQ(layers[0].tie_distance, std::numeric_limits<double>::infinity()) << layers[0].node;
}
