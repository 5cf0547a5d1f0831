// fuse_activations: which ReLUs it fuses in zoo models, that outputs, running statistics and
// gradients stay equal bit for bit, that the fused graph trains the traced model's own
// parameters, and what it leaves alone.
#include "fx_test_util.h"
#include "step_results.h"

using namespace qflow;
using namespace fxtest;

namespace {

size_t count_nodes(const fx::GraphModule& gm, fx::NodeOp op, const std::string& target) {
  size_t n = 0;
  for (const fx::Node* node : gm.graph())
    if (node->op() == op && node->target() == target) ++n;
  return n;
}

size_t count_modules(const fx::GraphModule& gm, const std::string& type) {
  size_t n = 0;
  for (const fx::Node* node : gm.graph())
    if (node->op() == fx::NodeOp::CallModule && gm.get_submodule(node->target())->type_name() == type) ++n;
  return n;
}

std::vector<std::string> state_keys(const nn::Module& m) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : m.state_dict()) keys.push_back(k);
  return keys;
}

using qflow::testing_util::step_results;

void expect_bitwise_equal(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].sizes(), b[i].sizes()) << "result " << i;
    if (a[i].dtype() == DType::Float32) EXPECT_EQ(to_vector<float>(a[i]), to_vector<float>(b[i])) << "result " << i;
    else EXPECT_EQ(to_vector<int64_t>(a[i]), to_vector<int64_t>(b[i])) << "result " << i;
  }
}

}  // namespace

TEST(FuseActivationsTest, ResNet18FusesEveryReluAndKeepsTrainingResultsBitForBit) {
  const Tensor x = [] { manual_seed(7); return randn({2, 3, 32, 32}); }();
  auto make = [] {
    manual_seed(0);
    return models::create("resnet18", {.num_classes = 10, .in_channels = 3, .image_size = 32});
  };
  auto plain = fx::symbolic_trace(make(), x);
  auto fused = fx::symbolic_trace(make(), x);
  const fx::ActivationFusions done = fx::fuse_activations(*fused);
  // The stem's and every block's first BN+ReLU; every block's residual add+ReLU.
  EXPECT_EQ(done.modules("BatchNorm2d"), 9u);
  EXPECT_EQ(done.add_relu, 8u);
  EXPECT_EQ(done.inplace_relu, 0u);
  EXPECT_EQ(done.modules("Conv2d"), 0u);  // in training every conv feeds a BN
  EXPECT_EQ(done.to_string(), "9 BatchNorm2d+ReLU fused, 8 add+ReLU fused, 0 ReLU made in-place");
  EXPECT_EQ(count_modules(*fused, "BatchNormReLU2d"), 9u);
  EXPECT_EQ(count_nodes(*fused, fx::NodeOp::CallFunction, "add_relu"), 8u);
  EXPECT_EQ(count_nodes(*fused, fx::NodeOp::CallFunction, "relu"), 0u);
  EXPECT_EQ(state_keys(*fused), state_keys(*plain));  // checkpoints load either way
  for (int step = 0; step < 2; ++step) expect_bitwise_equal(step_results(*fused, x), step_results(*plain, x));
  fused->eval();
  plain->eval();
  NoGradGuard no_grad;
  EXPECT_EQ(to_vector<float>((*fused)(x)), to_vector<float>((*plain)(x)));
}

TEST(FuseActivationsTest, TheFusedGraphTrainsTheTracedModelsOwnTensors) {
  manual_seed(0);
  auto model = models::create("resnet18", {.num_classes = 10, .in_channels = 1, .image_size = 28});
  const Tensor x = randn({2, 1, 28, 28});
  auto gm = fx::symbolic_trace(model, x);
  fx::fuse_activations(*gm);
  const Tensor bn_weight = model->get_parameter("layer1.0.bn1.weight");
  EXPECT_TRUE(gm->get_parameter("layer1.0.bn1.weight").is_same(bn_weight));
  EXPECT_TRUE(gm->get_buffer("bn1.running_mean").is_same(model->get_buffer("bn1.running_mean")));
  nn::optim::SGD sgd(gm->parameters(), nn::optim::SGDOptions{.lr = 0.1});
  const Tensor before = bn_weight.clone();
  (*gm)(x).sum().backward();
  sgd.step();
  EXPECT_NE(to_vector<float>(bn_weight), to_vector<float>(before));
  EXPECT_EQ(model->get_buffer("bn1.num_batches_tracked").item<int64_t>(), 1);
  // A clone of the fused graph is independent and equal.
  auto copy = std::dynamic_pointer_cast<fx::GraphModule>(gm->clone());
  EXPECT_FALSE(copy->get_parameter("layer1.0.bn1.weight").is_same(bn_weight));
  copy->eval();
  gm->eval();
  NoGradGuard no_grad;
  EXPECT_EQ(to_vector<float>((*copy)(x)), to_vector<float>((*gm)(x)));
}

TEST(FuseActivationsTest, ResNet18ForInferenceRunsConvBnReluAsOneConvolution) {
  const Tensor x = [] { manual_seed(8); return randn({2, 3, 32, 32}); }();
  manual_seed(0);
  auto model = models::create("resnet18", {.num_classes = 10, .in_channels = 3, .image_size = 32});
  {
    // Statistics a trained model could have, so that the fold is no near-identity.
    NoGradGuard no_grad;
    for (const auto& [path, m] : model->named_modules()) {
      if (auto bn = std::dynamic_pointer_cast<nn::BatchNorm2d>(m)) {
        nn::init::normal_(bn->bias, 0.0, 0.2);
        nn::init::normal_(bn->running_mean, 0.0, 0.2);
        nn::init::uniform_(bn->running_var, 0.5, 2.0);
      }
    }
  }
  model->eval();
  auto folded = fx::fuse_conv_bn(*fx::symbolic_trace(model, x));
  auto fused = fx::fuse_conv_bn(*fx::symbolic_trace(model, x));
  const fx::ActivationFusions done = fx::fuse_activations(*fused);
  EXPECT_EQ(done.modules("Conv2d"), 9u);  // the stem and every block's first conv (BN folded in)
  EXPECT_EQ(done.add_relu, 8u);
  EXPECT_EQ(done.modules("BatchNorm2d") + done.inplace_relu, 0u);
  EXPECT_EQ(count_modules(*fused, "ConvReLU2d"), 9u);
  NoGradGuard no_grad;
  EXPECT_EQ(to_vector<float>((*fused)(x)), to_vector<float>((*folded)(x)));
  const Tensor one = x.slice(0, 0, 1);  // batch 1 takes other kernels (direct, not Winograd)
  EXPECT_EQ(to_vector<float>((*fused)(one)), to_vector<float>((*folded)(one)));
}

TEST(FuseActivationsTest, LeNetConvReluFusesAndLinearReluRunsInPlace) {
  const Tensor x = [] { manual_seed(3); return randn({4, 1, 28, 28}); }();
  auto make = [] {
    manual_seed(1);
    return models::create("lenet5", {.num_classes = 10, .in_channels = 1, .image_size = 28});
  };
  auto plain = fx::symbolic_trace(make(), x);
  auto fused = fx::symbolic_trace(make(), x);
  const fx::ActivationFusions done = fx::fuse_activations(*fused);
  EXPECT_EQ(done.modules("BatchNorm2d") + done.add_relu, 0u);
  EXPECT_EQ(done.modules("Conv2d"), 2u);
  EXPECT_EQ(done.inplace_relu, 2u);
  EXPECT_EQ(count_modules(*fused, "ConvReLU2d"), 2u);
  EXPECT_EQ(count_nodes(*fused, fx::NodeOp::CallFunction, "relu_"), 2u);
  expect_bitwise_equal(step_results(*fused, x), step_results(*plain, x));
}

namespace {
// conv → relu, with the conv's output also read by the add: the ReLU must neither fuse nor
// overwrite it.
// bn → relu with the bn's output read twice: no fusion either.
struct SharedOutputs : nn::Cloneable<SharedOutputs> {
  std::shared_ptr<nn::Conv2d> conv = register_module("conv", nn::Conv2d({.in = 2, .out = 2, .kernel = 1}));
  std::shared_ptr<nn::BatchNorm2d> bn = register_module("bn", nn::BatchNorm2d({.features = 2}));
  std::shared_ptr<nn::ReLU> act = register_module("act", nn::ReLU());
  Tensor forward(const Tensor& x) override {
    const Tensor c = (*conv)(x);
    const Tensor b = (*bn)(x);
    return add(relu(c), c) + (*act)(b) * b + relu(add(x, x, Scalar(2)));
  }
};
}  // namespace

TEST(FuseActivationsTest, LeavesValuesOthersReadAndScaledAddsUnfused) {
  manual_seed(2);
  const Tensor x = randn({2, 2, 3, 3});
  auto gm = fx::symbolic_trace(std::make_shared<SharedOutputs>(), x);
  const Tensor expected = (*gm)(x);
  const fx::ActivationFusions done = fx::fuse_activations(*gm);
  EXPECT_EQ(done.modules("BatchNorm2d"), 0u);
  EXPECT_EQ(done.add_relu, 0u);      // alpha = 2 is not add_relu's sum
  EXPECT_EQ(done.inplace_relu, 1u);  // ... but the scaled sum is a fresh tensor only the ReLU reads
  EXPECT_EQ(count_nodes(*gm, fx::NodeOp::CallFunction, "relu"), 1u);  // relu(c): c is read again
  EXPECT_EQ(count_modules(*gm, "ReLU"), 1u);
  EXPECT_EQ(count_modules(*gm, "BatchNorm2d"), 1u);
  EXPECT_EQ(to_vector<float>((*gm)(x)), to_vector<float>(expected));
}

TEST(FuseActivationsTest, ReluModulesAfterAnAddAreAbsorbedAndTheirSubmodulesDeleted) {
  struct AddThenRelu : nn::Cloneable<AddThenRelu> {
    std::shared_ptr<nn::ReLU> act = register_module("act", nn::ReLU());
    Tensor forward(const Tensor& x) override { return (*act)(x + x * 2); }
  };
  manual_seed(4);
  const Tensor x = randn({3, 4});
  auto gm = fx::symbolic_trace(std::make_shared<AddThenRelu>(), x);
  const Tensor expected = (*gm)(x);
  EXPECT_EQ(fx::fuse_activations(*gm).add_relu, 1u);
  EXPECT_EQ(count_nodes(*gm, fx::NodeOp::CallFunction, "add_relu"), 1u);
  EXPECT_THAT(error_of([&] { gm->get_submodule("act"); }), ::testing::HasSubstr("act"));
  EXPECT_EQ(to_vector<float>((*gm)(x)), to_vector<float>(expected));
}
