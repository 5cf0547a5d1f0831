// The deploy model in integers (quantize + quantized_conv2d, Note [Integer activations]):
// computes the float simulation's function on ResNet18 for every published configuration;
// layers the integer kernels cannot take say why and stay in float; quant::fuse_integer_layers
// chains them in integers without changing the results.
#include <gmock/gmock.h>

#include "error_of.h"
#include "quant/pass_test_util.h"

using namespace qflow;
using namespace qflow::quant;
using namespace pass_test;
using qflow::testing_util::error_of;
using ::testing::HasSubstr;

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

// quant::fuse_integer_layers: each block's first convolution writes the second's uint8 input,
// the residual add and its ReLU become post-ops of the block's last convolution; the model's
// results stay those of the unfused integer model (up to requantization ties).
TEST(IntegerDeployTest, FuseIntegerLayersChainsBlocksAndKeepsTheResults) {
  const QConfig qc{.per_layer = false};
  auto deploy = trained_deploy(qc);
  manual_seed(13);
  const Tensor x = randn({4, 3, 32, 32});
  NoGradGuard no_grad;
  const Tensor unfused = (*deploy)(x);
  const IntegerFusions done = fuse_integer_layers(*deploy);
  EXPECT_EQ(done.activations.modules("DConv2d"), 9u);
  EXPECT_EQ(done.residual_adds, 8u);  // every block's add (+ReLU)
  EXPECT_EQ(done.requantized, 8u);    // every block's conv1 → conv2
  // Every residual (the stem's or a block's output, a shortcut conv's) is dead after its add.
  EXPECT_EQ(done.in_place_residuals, 8u);
  EXPECT_THAT(done.to_string(), HasSubstr("8 residual adds made convolution post-ops (8 in place), 8 layers write "
                                          "their successor's integers"));
  EXPECT_THAT(deploy->get_submodule("layer1.0.conv1")->repr(), HasSubstr("integer=True, output=int8, relu=True"));
  EXPECT_THAT(deploy->get_submodule("layer1.0.conv2")->repr(),
              HasSubstr("integer=True, residual_in_place=True, relu=True"));
  for (const fx::Node* n : deploy->graph()) EXPECT_NE(n->target(), "add_relu") << n->name();
  const Tensor fused = (*deploy)(x);
  expect_close_to_scale(fused, unfused, 5e-2);
  EXPECT_EQ(to_vector<int64_t>(fused.argmax(1)), to_vector<int64_t>(unfused.argmax(1)));
  // A layer fed integers of another grid type says so.
  const auto conv2 = std::dynamic_pointer_cast<DConv2d>(deploy->get_submodule("layer1.0.conv2"));
  EXPECT_THAT(error_of([&] { (*conv2)(zeros({1, 64, 8, 8}, DType::UInt8)); }),
              HasSubstr("DConv2d: got a uint8 input, but its input grid (symmetric) is int8"));
}

// The integers a requantizing layer writes are those quantize makes of its float output with
// the next layer's qparams, except where the float rounding of the scaling decides a tie.
TEST(IntegerDeployTest, RequantizedOutputsEqualTheNextLayersQuantizedInput) {
  for (const QConfig qc : {QConfig{.per_layer = false}, QConfig{.formula = Formula::Cambricon}}) {
    auto deploy = trained_deploy(qc);
    const auto first = std::dynamic_pointer_cast<DConv2d>(deploy->get_submodule("layer1.0.conv1"));
    const auto second = std::dynamic_pointer_cast<DConv2d>(deploy->get_submodule("layer1.0.conv2"));
    const auto relu_first = std::dynamic_pointer_cast<DConv2d>(first->fused_with_relu());
    manual_seed(15);
    const Tensor x = randn({4, 64, 16, 16});
    NoGradGuard no_grad;
    const Tensor want = quantize(relu((*first)(x)), second->input_scale, second->input_zero_point,
                                 qc.quant_min(), qc.quant_max(), 0, DType::Int8);
    relu_first->requantize_output(quant::detail::OutputGrid{second->input_scale, second->input_zero_point, qc});
    const Tensor got = (*relu_first)(x);
    ASSERT_EQ(got.dtype(), DType::Int8);
    const std::vector<int64_t> g = to_vector<int64_t>(got.to(DType::Int64)), w = to_vector<int64_t>(want.to(DType::Int64));
    int64_t off = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      EXPECT_LE(std::abs(g[i] - w[i]), 1) << i;
      off += g[i] != w[i];
    }
    EXPECT_LE(off, static_cast<int64_t>(g.size()) / 10000) << off << " of " << g.size();
    // The next layer takes them as its input: the same result as from the float activation.
    expect_close_to_scale((*second)(got), (*second)(relu((*first)(x))), off == 0 ? 1e-6 : 1e-2);
  }
}

namespace {

// Residual adds whose residual must survive the add: `a` is read again after the first add,
// and the graph's input is the second block's residual.
struct LiveResiduals : nn::Cloneable<LiveResiduals> {
  std::shared_ptr<nn::Conv2d> stem = register_module("stem", nn::Conv2d({.in = 8, .out = 8, .kernel = 3, .padding = 1}));
  std::shared_ptr<nn::Conv2d> body = register_module("body", nn::Conv2d({.in = 8, .out = 8, .kernel = 3, .padding = 1}));
  std::shared_ptr<nn::Conv2d> side = register_module("side", nn::Conv2d({.in = 8, .out = 8, .kernel = 3, .padding = 1}));
  Tensor forward(const Tensor& x) override {
    const Tensor a = (*stem)(x);
    const Tensor y = (*body)(a) + a;  // a is read again below
    return (*side)(y) + x + a;        // the residual x is the graph's input
  }
};

}  // namespace

// fuse_integer_layers sums into a residual only when nothing reads it later and it is a fresh
// tensor of the graph's own: live residuals and the caller's input are left untouched.
TEST(IntegerDeployTest, ResidualsStillReadLaterAreNotSummedInPlace) {
  manual_seed(21);
  const Tensor example = randn({2, 8, 6, 6});
  auto float_gm = fx::symbolic_trace(std::make_shared<LiveResiduals>(), example);
  const QConfig qc{};
  auto qat = quantization_aware_training(*float_gm, example, qc);
  (*qat)(example);  // the observers see a batch
  auto deploy = dequantization_aware_training(*float_gm, *qat, example, qc);
  deploy->eval();
  NoGradGuard no_grad;
  const Tensor x = randn({2, 8, 6, 6});
  const std::vector<float> x_before = to_vector<float>(x);
  const Tensor unfused = (*deploy)(x);
  const IntegerFusions done = fuse_integer_layers(*deploy);
  EXPECT_EQ(done.residual_adds, 2u);
  EXPECT_EQ(done.in_place_residuals, 0u);
  for (const auto& conv : dconvs(*deploy)) EXPECT_FALSE(conv->adds_residual_in_place());
  const Tensor fused = (*deploy)(x);
  EXPECT_EQ(to_vector<float>(x), x_before);  // the caller's tensor is left as it was
  expect_close_to_scale(fused, unfused, 1e-5);
}
