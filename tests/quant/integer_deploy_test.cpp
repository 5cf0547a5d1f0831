// DConv2d::set_integer: the deploy model's convolutions in integers (quantize + quantized_conv2d,
// Note [Integer convolution]) compute the float simulation's function on ResNet18 for every
// published configuration; layers the integer kernels cannot take say why and stay in float.
#include "quant/pass_test_util.h"

using namespace qflow;
using namespace qflow::quant;
using namespace pass_test;

namespace {

std::vector<std::shared_ptr<DConv2d>> dconvs(fx::GraphModule& gm) {
  std::vector<std::shared_ptr<DConv2d>> out;
  for (const auto& [path, m] : gm.named_modules())
    if (auto d = std::dynamic_pointer_cast<DConv2d>(m)) out.push_back(d);
  return out;
}

// The eval-mode deploy model of a ResNet18 QAT model trained 2 steps with `qc`.
std::shared_ptr<fx::GraphModule> trained_deploy(const QConfig& qc) {
  manual_seed(11);
  const Tensor example = randn({2, 3, 32, 32});
  auto float_gm = traced("resnet18", example, 2);
  auto qat = quantization_aware_training(*float_gm, example, qc);
  manual_seed(12);
  train_steps(*qat, randn({4, 3, 32, 32}), randint(0, 10, {4}), 2, 0.02);
  auto deploy = dequantization_aware_training(*float_gm, *qat, example, qc);
  deploy->eval();
  return deploy;
}

}  // namespace

class IntegerDeploy : public ::testing::TestWithParam<QConfig> {};

TEST_P(IntegerDeploy, ComputesTheSimulatedDeployModelsFunction) {
  const QConfig qc = GetParam();
  auto deploy = trained_deploy(qc);
  manual_seed(13);
  const Tensor x = randn({8, 3, 32, 32});
  NoGradGuard no_grad;
  const Tensor simulated = (*deploy)(x);
  int integer_layers = 0;
  for (const auto& d : dconvs(*deploy)) {
    d->set_integer(true);
    const std::string why = d->integer_unsupported();
    if (why.empty()) {
      ++integer_layers;
    } else if (qc.scheme == Scheme::Affine) {
      EXPECT_EQ(why, "the weights have a zero point (affine weights)");
    }
  }
  if (qc.scheme == Scheme::Symmetric) {
    EXPECT_EQ(integer_layers, 20);  // symmetric weights: every convolution runs in integers
  }
  const Tensor integer = (*deploy)(x);
  // The sums are exact in both and each layer alone agrees to 1e-5 (EachLayerAloneMatches...);
  // their float scaling rounds differently, which moves an activation across a rounding
  // boundary of the next layer's grid now and then, and 20 layers of a barely trained network
  // carry such steps to the output: up to 4 % of its scale measured, the argmax unchanged.
  expect_close_to_scale(integer, simulated, 5e-2);
  EXPECT_EQ(to_vector<int64_t>(integer.argmax(1)), to_vector<int64_t>(simulated.argmax(1)));
}

INSTANTIATE_TEST_SUITE_P(PublishedConfigs, IntegerDeploy,
                         ::testing::Values(QConfig{}, QConfig{.per_layer = false}, QConfig{.scheme = Scheme::Affine},
                                           QConfig{.scheme = Scheme::Affine, .per_layer = false},
                                           QConfig{.formula = Formula::Cambricon}),
                         [](const ::testing::TestParamInfo<QConfig>& info) {
                           const QConfig& q = info.param;
                           return fmt::format("{}_{}_{}", to_string(q.scheme), to_string(q.formula),
                                              q.per_layer ? "per_layer" : "per_channel");
                         });

TEST(IntegerDeployTest, MoreThanEightBitsStaysInFloatAndSaysWhy) {
  DConv2d d({.in = 2, .out = 2, .kernel = 1}, QConfig{.bits = 12});
  EXPECT_EQ(d.integer_unsupported(), "12 bits do not fit int8");
  DConv2d e({.in = 2, .out = 2, .kernel = 1}, QConfig{});
  EXPECT_EQ(e.integer_unsupported(), "the input scale is 0 (an empty or all-zero range)");
}

TEST(IntegerDeployTest, EachLayerAloneMatchesItsSimulation) {
  const QConfig qc;
  auto deploy = trained_deploy(qc);
  NoGradGuard no_grad;
  for (const auto& d : dconvs(*deploy)) {
    const auto& o = d->options();
    manual_seed(14);
    const Tensor x = randn({2, o.in, 8, 8});
    d->set_integer(false);
    const Tensor simulated = (*d)(x);
    d->set_integer(true);
    const Tensor integer = (*d)(x);
    expect_close_to_scale(integer, simulated, 1e-5);
  }
}

TEST(IntegerDeployTest, FusedReluRunsAsThePostOpAndKeepsTheResults) {
  const QConfig qc{.per_layer = false};
  auto deploy = trained_deploy(qc);
  for (const auto& d : dconvs(*deploy)) d->set_integer(true);
  manual_seed(13);
  const Tensor x = randn({4, 3, 32, 32});
  NoGradGuard no_grad;
  const Tensor unfused = (*deploy)(x);
  const fx::ActivationFusions done = fx::fuse_activations(*deploy);
  EXPECT_EQ(done.modules("DConv2d"), 9u);  // the stem's and every block's first conv
  EXPECT_EQ(done.add_relu, 8u);
  EXPECT_THAT(deploy->get_submodule("conv1")->repr(), ::testing::HasSubstr("integer=True, relu=True"));
  // oneDNN's ReLU post-op on the float32 output equals relu() on it.
  EXPECT_EQ(to_vector<float>((*deploy)(x)), to_vector<float>(unfused));
}
