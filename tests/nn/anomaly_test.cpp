// nn::DetectAnomaly: the first NaN/Inf of a step is reported with the dotted path of the
// module it appeared in (parameter, op output, backward node, module output or the data).
#include <limits>

#include "nn/test_modules.h"

using namespace qflow;
using namespace qflow::nn;
using nn::testing::error_of;
using nn::testing::fill;
using ::testing::HasSubstr;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// sqrt: finite at 0, its derivative is not.
struct Sqrt : Cloneable<Sqrt> {
  Tensor forward(const Tensor& x) override { return x.sqrt(); }
  std::string type_name() const override { return "Sqrt"; }
};

struct ConvBlock : Cloneable<ConvBlock> {
  std::shared_ptr<Conv2d> conv1 = register_module("conv1", Conv2d({.in = 2, .out = 2, .kernel = 3, .padding = 1}));
  std::shared_ptr<ReLU> relu = register_module("relu", ReLU());
  Tensor forward(const Tensor& x) override { return (*relu)((*conv1)(x)); }
  std::string type_name() const override { return "ConvBlock"; }
};

// Paths like ResNet's: layer1.0.conv1, layer2.0.conv1, layer2.1.
struct ResNetLike : Cloneable<ResNetLike> {
  std::shared_ptr<Sequential> layer1 = register_module("layer1", Sequential(ConvBlock()));
  std::shared_ptr<Sequential> layer2 = register_module("layer2", Sequential(ConvBlock(), Sqrt()));
  Tensor forward(const Tensor& x) override { return (*layer2)((*layer1)(x)); }
  std::string type_name() const override { return "ResNetLike"; }
  Tensor weight(const char* path) const { return get_parameter(path); }
};

Tensor input() { return ones({1, 2, 4, 4}); }

// Every layer1 output is positive: each conv output sums at least 4 products 0.5 * 1 per channel.
std::shared_ptr<ResNetLike> positive_net() {
  auto net = std::make_shared<ResNetLike>();
  fill(net->weight("layer1.0.conv1.weight"), 0.5f);
  fill(net->weight("layer1.0.conv1.bias"), 0.0f);
  fill(net->weight("layer2.0.conv1.weight"), 0.25f);
  fill(net->weight("layer2.0.conv1.bias"), 0.0f);
  return net;
}

}  // namespace

TEST(DetectAnomalyTest, AParameterHoldingInfIsReportedBeforeItsModuleRuns) {
  auto net = positive_net();
  fill(net->weight("layer2.0.conv1.weight"), kInf);
  DetectAnomaly anomaly(*net);
  EXPECT_EQ(error_of([&] { (void)(*net)(input()); }),
            "detect_anomaly: parameter 'layer2.0.conv1.weight' of module 'layer2.0.conv1' (Conv2d) holds inf in 36 of 36 "
            "elements before the module runs");
}

TEST(DetectAnomalyTest, AnOverflowIsReportedAtTheOpAndModuleThatMadeIt) {
  auto net = positive_net();
  // Finite, but the products overflow float32 (3e38 * inputs >= 1).
  fill(net->weight("layer2.0.conv1.weight"), 3e38f);
  DetectAnomaly anomaly(*net);
  EXPECT_EQ(error_of([&] { (void)(*net)(input()); }),
            "detect_anomaly: forward: op 'conv2d' in module 'layer2.0.conv1' (Conv2d) returned inf in 32 of 32 elements in "
            "output 0 of shape [1, 2, 4, 4]; all its inputs were finite, so this op produced it");
}

TEST(DetectAnomalyTest, ABackwardInfNamesTheNodeAndTheModuleItsOpRanIn) {
  auto net = positive_net();
  fill(net->weight("layer2.0.conv1.weight"), -1.0f);  // relu gives zeros, sqrt'(0) is inf
  DetectAnomaly anomaly(*net);
  const Tensor out = (*net)(input());
  EXPECT_EQ(to_vector<float>(out), std::vector<float>(32, 0.0f));  // the forward is finite
  EXPECT_EQ(error_of([&] { out.sum().backward(); }),
            "detect_anomaly: backward: 'SqrtBackward' (of an op that ran in module 'layer2.1' (Sqrt)) returned inf in 32 "
            "of 32 elements in the gradient of its input 0 (shape [1, 2, 4, 4]); the gradients it received were finite");
}

TEST(DetectAnomalyTest, NonFiniteDataIsReportedAsSuch) {
  auto net = positive_net();
  DetectAnomaly anomaly(*net);
  Tensor x = input();
  x.view({-1}).narrow(0, 5, 1).fill_(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(error_of([&] { (void)(*net)(x); }),
            "detect_anomaly: input 0 (shape [1, 2, 4, 4]) of module '<root>' (ResNetLike) holds nan in 1 of 32 elements: "
            "the data is not finite");
  // The guard is still usable after an error.
  EXPECT_EQ(to_vector<float>((*net)(input())).size(), 32u);
}

TEST(DetectAnomalyTest, ModuleOutputsCatchWhatNoOpCheckSaw) {
  auto net = positive_net();
  fill(net->weight("layer2.0.conv1.weight"), 3e38f);
  DetectAnomaly anomaly(*net);
  NoGradGuard no_grad;  // ops record nothing, so only the module check sees the overflow
  EXPECT_EQ(error_of([&] { (void)(*net)(input()); }),
            "detect_anomaly: forward: module 'layer2.0.conv1' (Conv2d) returned inf in 32 of 32 elements in output 0 of "
            "shape [1, 2, 4, 4] (made by ops that record no gradient, so no op check saw it)");
}

TEST(DetectAnomalyTest, TheGuardRestoresEverythingAndRefusesToNestInAnotherHook) {
  auto net = positive_net();
  {
    DetectAnomaly anomaly(*net);
    EXPECT_TRUE(autograd::is_anomaly_enabled());
    EXPECT_NE(module_call_hook(), nullptr);
    EXPECT_THAT(error_of([&] { DetectAnomaly again(*net); }),
                HasSubstr("DetectAnomaly: another module call hook (fx tracing?) is installed on this thread"));
    EXPECT_TRUE(autograd::is_anomaly_enabled());  // the refused guard restored what it found
  }
  EXPECT_FALSE(autograd::is_anomaly_enabled());
  EXPECT_EQ(module_call_hook(), nullptr);
}

TEST(DetectAnomalyTest, AFiniteTrainingStepIsUnchangedByTheChecks) {
  auto checked = std::make_shared<ResNetLike>();
  auto plain = std::dynamic_pointer_cast<ResNetLike>(checked->clone());
  const Tensor x = arange(0, 32, 1, DType::Float32).view({1, 2, 4, 4}) * 0.1 + 1.0;
  auto step = [&](ResNetLike& net) {
    optim::SGD opt(net.parameters(), {.lr = 0.1, .momentum = 0.9});
    opt.zero_grad();
    const Tensor h = (*net.layer1)(x);
    (h * h).mean().backward();  // layer1 only: no sqrt at zero
    opt.step();
  };
  {
    DetectAnomaly anomaly(*checked);
    step(*checked);
  }
  step(*plain);
  const StateDict a = checked->state_dict(), b = plain->state_dict();
  for (const auto& [key, t] : a) EXPECT_EQ(to_vector<float>(t), to_vector<float>(b.at(key))) << key;
}
