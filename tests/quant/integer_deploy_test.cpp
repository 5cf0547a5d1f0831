// The deploy model in integers (quantize + quantized_conv2d, Note [Integer activations]), on
// ResNet18: layers the integer kernels cannot take say why and stay in float; each layer alone
// computes its simulation; quant::fuse_integer_layers chains them in integers without changing
// the results. The whole models against their simulation, for ResNet18, MobileNetV2 and LeNet5
// in every published configuration, are in integer_zoo_test.cpp.
#include <gmock/gmock.h>

#include "error_of.h"
#include "quant/layer_by_layer.h"
#include "quant/trained_deploy.h"

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
std::shared_ptr<fx::GraphModule> trained_deploy(const QConfig& qc) { return pass_test::trained_deploy(integer_zoo()[0], qc); }

}  // namespace

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
// the residual add and its ReLU become post-ops of the block's last convolution; the model still
// computes its simulation's function.
TEST(IntegerDeployTest, FuseIntegerLayersChainsBlocksAndKeepsTheResults) {
  const QConfig qc{.per_layer = false};
  auto deploy = trained_deploy(qc);
  manual_seed(13);
  const Tensor x = randn({4, 3, 32, 32});
  NoGradGuard no_grad;
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
  // The fused model computes the simulation's function (the unfused integer model's too, up to
  // requantization ties): checked end to end the way that holds on every CPU, rather than with
  // a tolerance on the logits measured on one (layer_by_layer.h).
  expect_end_to_end_agreement(*deploy, x);
  // A layer fed integers of another grid type says so.
  const auto conv2 = std::dynamic_pointer_cast<DConv2d>(deploy->get_submodule("layer1.0.conv2"));
  EXPECT_THAT(error_of([&] { (*conv2)(zeros({1, 64, 8, 8}, DType::UInt8)); }),
              HasSubstr("DConv2d: got a uint8 input, but its input grid (symmetric) is int8"));
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
