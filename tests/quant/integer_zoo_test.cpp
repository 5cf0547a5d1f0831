// Issue 19's coverage: ResNet18, MobileNetV2 (depthwise convolutions) and LeNet5, each in the
// five published configurations, go the users' road — QAT, a few training steps, deploy,
// quant::fuse_integer_layers — and the integer model computes the float simulation's function:
// the same argmax, outputs close, and layer by layer the same quantized activations except at
// ties (Note [Integer activations]).
#include <gmock/gmock.h>

#include <tuple>

#include "quant/layer_by_layer.h"
#include "quant/trained_deploy.h"

using namespace qflow;
using namespace qflow::quant;
using namespace pass_test;

namespace {

// symmetric/google per-layer and per-channel, affine/google per-layer and per-channel,
// symmetric/cambricon per-layer: the configurations benchmarks/accuracy publishes.
const std::vector<QConfig> kPublished{QConfig{}, QConfig{.per_layer = false}, QConfig{.scheme = Scheme::Affine},
                                      QConfig{.scheme = Scheme::Affine, .per_layer = false},
                                      QConfig{.formula = Formula::Cambricon}};

std::string config_name(const QConfig& q) {
  return fmt::format("{}_{}_{}", to_string(q.scheme), to_string(q.formula), q.per_layer ? "per_layer" : "per_channel");
}

// Deployed layers (DConv2d, DLinear) and how many of them run the integer kernels.
std::pair<size_t, size_t> integer_layers_of(nn::Module& m) {
  const size_t layers = set_integer(m, true);
  return {layers - float_layers(m).size(), layers};
}

// How far the integer model's logits may sit from the simulation's, relative to their largest.
// Each layer alone agrees with its simulation to float rounding (compare_layer_inputs below),
// but where a layer's value sits on a tie of the next grid the two round it one step apart, and
// the layers after it carry that step to the logits. These networks are barely trained (random
// images, 2 steps), which amplifies a single step: measured on this test's batch, in the three
// convolution settings ctest runs (oneDNN auto and direct, im2col), one to six flipped integers
// out of millions moved ResNet18's logits by up to 4.0 % of their scale, MobileNetV2's (58
// layers, 34 of them chained in integers) by up to 8.7 %. LeNet5 chains nothing (its
// convolutions feed max-pooling, and linear layers write float) and hit no tie: 1.2e-7.
double logits_tolerance(const std::string& model) {
  if (model == "lenet5") return 1e-5;
  return model == "mobilenet_v2" ? 0.15 : 0.06;
}

// "Except at exact ties": the simulation's value of an integer that differs sits this close to
// the midpoint between the two integers, in steps of the grid. Its float32 sums carry relative
// errors near 1e-6, and a grid has at most 255 steps: well under 1e-3 of a step (measured:
// 1e-5 at most). An integer wrong for any other reason (a wrong scale, bias or rounding) comes
// from a value anywhere in its step, nearly always farther from the midpoint than that.
constexpr double kTieSteps = 1e-3;

}  // namespace

class IntegerZoo : public ::testing::TestWithParam<std::tuple<ZooInput, QConfig>> {};

TEST_P(IntegerZoo, TrainedModelInIntegersComputesItsSimulation) {
  const auto& [zoo, qc] = GetParam();
  auto deploy = trained_deploy(zoo, qc);
  const IntegerFusions fusions = fuse_integer_layers(*deploy);
  const auto [integer_layers, layers] = integer_layers_of(*deploy);
  if (qc.scheme == Scheme::Symmetric) {
    EXPECT_EQ(integer_layers, layers) << fmt::format("{}", fmt::join(float_layers(*deploy), "\n"));
    EXPECT_GT(fusions.activations.modules("DConv2d"), 0u);  // the ReLUs became post-ops
  } else {  // oneDNN 2.6 refuses the weights' zero point: every layer runs the simulation, and says why
    EXPECT_EQ(integer_layers, 0u);
    for (const std::string& why : float_layers(*deploy))
      EXPECT_THAT(why, ::testing::EndsWith(": the weights have a zero point (affine weights)"));
  }
  manual_seed(13);
  const Tensor x = zoo_batch(zoo, 8);
  NoGradGuard no_grad;
  set_integer(*deploy, false);
  const Tensor simulated = (*deploy)(x);
  set_integer(*deploy, true);
  const Tensor integer = (*deploy)(x);
  EXPECT_EQ(to_vector<int64_t>(integer.argmax(1)), to_vector<int64_t>(simulated.argmax(1)));
  expect_close_to_scale(integer, simulated, logits_tolerance(zoo.model));

  int64_t elements = 0, differ = 0;
  for (const LayerInputIntegers& l : compare_layer_inputs(*deploy, x)) {
    elements += l.elements, differ += l.differ;
    EXPECT_EQ(l.differ_by_more_than_one, 0) << l.node;
    EXPECT_LE(l.tie_distance, kTieSteps) << l.node << ": " << l.differ << " of " << l.elements << " integers differ";
  }
  EXPECT_GT(elements, 0);
  // Ties are rare: measured at most 6 of ResNet18's 5.3 million.
  EXPECT_LE(differ, elements / 100000 + 1) << differ << " of " << elements;
}

INSTANTIATE_TEST_SUITE_P(PublishedConfigs, IntegerZoo,
                         ::testing::Combine(::testing::ValuesIn(integer_zoo()), ::testing::ValuesIn(kPublished)),
                         [](const ::testing::TestParamInfo<std::tuple<ZooInput, QConfig>>& info) {
                           return zoo_input_name(std::get<0>(info.param)) + "_" + config_name(std::get<1>(info.param));
                         });

// 4-bit weights on 8-bit activations run in integers too: the 4-bit grid is a subset of int8's.
INSTANTIATE_TEST_SUITE_P(W4A8, IntegerZoo,
                         ::testing::Combine(::testing::ValuesIn(integer_zoo()),
                                            ::testing::Values(QConfig{.bits = 4, .per_layer = false, .activation_bits = 8})),
                         [](const ::testing::TestParamInfo<std::tuple<ZooInput, QConfig>>& info) {
                           return zoo_input_name(std::get<0>(info.param));
                         });

// The comparison above can fail: a layer that requantizes onto a grid other than its
// successor's (here twice the scale) hands it integers that are off by far more than a tie.
TEST(IntegerZooTest, LayerByLayerComparisonCatchesAWrongRequantization) {
  const QConfig qc;
  auto deploy = trained_deploy(integer_zoo()[0], qc);
  fuse_integer_layers(*deploy);
  const auto conv1 = std::dynamic_pointer_cast<DConv2d>(deploy->get_submodule("layer1.0.conv1"));
  ASSERT_TRUE(conv1->output_grid());
  const quant::detail::OutputGrid right = *conv1->output_grid();
  conv1->requantize_output(quant::detail::OutputGrid{right.scale * 2, right.zero_point, right.qconfig});
  manual_seed(13);
  bool caught = false;
  for (const LayerInputIntegers& l : compare_layer_inputs(*deploy, zoo_batch(integer_zoo()[0], 2))) {
    if (l.node != "layer1_0_conv2") {
      EXPECT_LE(l.tie_distance, kTieSteps) << l.node;  // the other layers are untouched
      continue;
    }
    caught = true;
    EXPECT_GT(l.differ, l.elements / 4);
    EXPECT_GT(l.differ_by_more_than_one, 0);
    EXPECT_GT(l.tie_distance, 0.4);
  }
  EXPECT_TRUE(caught);
}
