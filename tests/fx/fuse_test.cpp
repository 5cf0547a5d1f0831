// fuse_conv_bn: the folding algebra on hand-computed values, and whole zoo models whose fused
// eval output equals the unfused one within float rounding, with no BatchNorm2d left.
#include <cmath>

#include "fx_test_util.h"

#include "relative_error.h"

using namespace qflow;
using namespace fxtest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace {

size_t count_modules(const fx::GraphModule& gm, const std::string& type) {
  size_t n = 0;
  for (const fx::Node* node : gm.graph())
    if (node->op() == fx::NodeOp::CallModule && gm.get_submodule(node->target())->type_name() == type) ++n;
  return n;
}

// Statistics a trained model could have, so the folding is not a near-identity.
void randomise_batch_norms(nn::Module& model) {
  NoGradGuard no_grad;
  for (const auto& [path, m] : model.named_modules()) {
    auto bn = std::dynamic_pointer_cast<nn::BatchNorm2d>(m);
    if (!bn) continue;
    if (bn->options().affine) {
      nn::init::uniform_(bn->weight, 0.5, 1.5);
      nn::init::normal_(bn->bias, 0.0, 0.2);
    }
    if (bn->options().track_running_stats) {
      nn::init::normal_(bn->running_mean, 0.0, 0.2);
      nn::init::uniform_(bn->running_var, 0.5, 2.0);
    }
  }
}

using qflow::testing_util::relative_error;

}  // namespace

TEST(FuseConvBnTest, FoldsTheStatisticsIntoWeightAndBias) {
  auto conv = std::make_shared<nn::Conv2d>(nn::Conv2dOptions{.in = 1, .out = 2, .kernel = 1});
  auto bn = std::make_shared<nn::BatchNorm2d>(nn::BatchNormOptions{.features = 2, .eps = 1.0});
  {
    NoGradGuard no_grad;
    conv->weight.copy_(from_vector<float>({2.0f, -1.0f}).view({2, 1, 1, 1}));
    conv->bias.copy_(from_vector<float>({0.5f, 1.0f}));
    bn->weight.copy_(from_vector<float>({3.0f, 0.5f}));
    bn->bias.copy_(from_vector<float>({0.25f, -1.0f}));
    bn->running_mean.copy_(from_vector<float>({1.0f, 2.0f}));
    bn->running_var.copy_(from_vector<float>({3.0f, 0.0f}));
  }
  bn->eval();
  conv->eval();
  // s = gamma / sqrt(var + eps) = (3/2, 0.5/1); W' = W*s; b' = beta + (b - mean)*s.
  auto fused = fx::fuse_conv_bn_eval(*conv, *bn);
  EXPECT_EQ(to_vector<float>(fused->weight), (std::vector<float>{3.0f, -0.5f}));
  EXPECT_EQ(to_vector<float>(fused->bias), (std::vector<float>{-0.5f, -1.5f}));
  EXPECT_FALSE(fused->is_training());
  EXPECT_TRUE(fused->weight.requires_grad());
  // Without a conv bias and without BN affine parameters: s = 1/sqrt(var + eps), b' = -mean*s.
  auto plain = std::make_shared<nn::Conv2d>(nn::Conv2dOptions{.in = 1, .out = 2, .kernel = 1, .bias = false});
  auto norm = std::make_shared<nn::BatchNorm2d>(nn::BatchNormOptions{.features = 2, .eps = 1.0, .affine = false});
  {
    NoGradGuard no_grad;
    plain->weight.copy_(from_vector<float>({2.0f, -1.0f}).view({2, 1, 1, 1}));
    norm->running_mean.copy_(from_vector<float>({1.0f, 2.0f}));
    norm->running_var.copy_(from_vector<float>({3.0f, 0.0f}));
  }
  auto folded = fx::fuse_conv_bn_eval(*plain, *norm);
  EXPECT_EQ(to_vector<float>(folded->weight), (std::vector<float>{1.0f, -1.0f}));
  EXPECT_EQ(to_vector<float>(folded->bias), (std::vector<float>{-0.5f, -2.0f}));
  EXPECT_TRUE(folded->options().bias);
}

TEST(FuseConvBnTest, GroupedStridedConvMatchesConvThenBatchNorm) {
  manual_seed(21);
  nn::Sequential seq(nn::Conv2d({.in = 4, .out = 4, .kernel = 3, .stride = 2, .padding = 1, .groups = 4, .bias = false}),
                     nn::BatchNorm2d({.features = 4}));
  randomise_batch_norms(seq);
  seq.eval();
  auto fused = fx::fuse_conv_bn_eval(*seq.at<nn::Conv2d>(0), *seq.at<nn::BatchNorm2d>(1));
  EXPECT_EQ(fused->options().groups, 4);
  const Tensor x = randn({2, 4, 5, 5});
  NoGradGuard no_grad;
  EXPECT_LT(relative_error((*fused)(x), seq(x)), 1e-6);
}

TEST(FuseConvBnTest, RefusesBatchNormsItCannotFold) {
  nn::Conv2d conv({.in = 1, .out = 2, .kernel = 1});
  nn::BatchNorm2d three({.features = 3});
  nn::BatchNorm2d batch_stats({.features = 2, .track_running_stats = false});
  EXPECT_THAT(error_of([&] { fx::fuse_conv_bn_eval(conv, three); }),
              HasSubstr("fuse_conv_bn_eval: BatchNorm2d(3) cannot follow a Conv2d with 2 output channels"));
  EXPECT_THAT(error_of([&] { fx::fuse_conv_bn_eval(conv, batch_stats); }),
              HasSubstr("fuse_conv_bn_eval: the BatchNorm2d has no running statistics"));
}

TEST(FuseConvBnTest, ResNet18FusedEqualsUnfusedInEval) {
  manual_seed(7);
  nn::ModulePtr model = models::create("resnet18");
  randomise_batch_norms(*model);
  model->eval();
  auto gm = fx::symbolic_trace(model, randn({1, 3, 32, 32}));
  const std::string before = gm->graph().to_string();
  const auto keys_before = gm->state_dict().keys();
  auto fused = fx::fuse_conv_bn(*gm);

  EXPECT_EQ(count_modules(*fused, "BatchNorm2d"), 0u);
  EXPECT_EQ(count_modules(*fused, "Conv2d"), 20u);
  EXPECT_EQ(fused->graph().size(), gm->graph().size() - 20);
  EXPECT_NO_THROW(fused->recompile());
  EXPECT_FALSE(fused->is_training());
  for (const auto& [key, t] : fused->state_dict()) EXPECT_EQ(key.find("bn"), std::string::npos) << key;
  EXPECT_EQ(fused->graph().node("layer1_0_conv1").target(), "layer1.0.conv1");
  EXPECT_EQ(fx::format_arguments(fused->graph().node("relu").args()), "(%conv1,)");
  EXPECT_EQ(fused->get_submodule("layer2.0.shortcut.0")->type_name(), "Conv2d");
  EXPECT_TRUE(fused->get_submodule<nn::Conv2d>("conv1")->bias.defined());
  // The input is untouched: same graph, same modules, the BatchNorms still in place.
  EXPECT_EQ(gm->graph().to_string(), before);
  EXPECT_EQ(gm->state_dict().keys(), keys_before);
  EXPECT_EQ(gm->get_submodule("conv1").get(), model->get_submodule("conv1").get());

  const Tensor x = randn({2, 3, 32, 32});
  NoGradGuard no_grad;
  const Tensor want = (*model)(x);
  EXPECT_TRUE(same_values((*gm)(x), want));
  EXPECT_LT(relative_error((*fused)(x), want), 1e-5);
}

TEST(FuseConvBnTest, TrainingModeIsRefusedAndTheInputKept) {
  manual_seed(8);
  auto gm = fx::symbolic_trace(models::create("resnet18"), randn({1, 3, 32, 32}));
  const std::string before = gm->graph().to_string();
  EXPECT_THAT(error_of([&] { fx::fuse_conv_bn(*gm); }),
              HasSubstr("fuse_conv_bn: %bn1 (bn1) is in training mode; folding freezes the running statistics"));
  EXPECT_EQ(gm->graph().to_string(), before);
}

TEST(FuseConvBnTest, AConvReadTwiceOrABatchNormWithoutStatisticsStays) {
  struct Net : nn::Cloneable<Net> {
    std::shared_ptr<nn::Conv2d> conv1 = register_module("conv1", nn::Conv2d({.in = 2, .out = 2, .kernel = 1}));
    std::shared_ptr<nn::BatchNorm2d> bn1 = register_module("bn1", nn::BatchNorm2d({.features = 2}));
    std::shared_ptr<nn::Conv2d> conv2 = register_module("conv2", nn::Conv2d({.in = 2, .out = 2, .kernel = 1}));
    std::shared_ptr<nn::BatchNorm2d> bn2 =
        register_module("bn2", nn::BatchNorm2d({.features = 2, .track_running_stats = false}));
    std::shared_ptr<nn::Conv2d> conv3 = register_module("conv3", nn::Conv2d({.in = 2, .out = 2, .kernel = 1}));
    std::shared_ptr<nn::BatchNorm2d> bn3 = register_module("bn3", nn::BatchNorm2d({.features = 2}));
    Tensor forward(const Tensor& x) override {
      Tensor a = (*conv1)(x);
      Tensor b = (*bn1)(a) + a;  // conv1 has two users
      return (*bn3)((*conv3)((*bn2)((*conv2)(b))));
    }
  };
  manual_seed(9);
  auto net = std::make_shared<Net>();
  randomise_batch_norms(*net);
  net->eval();
  auto fused = fx::fuse_conv_bn(*fx::symbolic_trace(net, randn({1, 2, 3, 3})));
  EXPECT_THAT(names_of(fused->graph()), ElementsAre("x", "conv1", "bn1", "add", "conv2", "bn2", "conv3", "output"));
  const Tensor x = randn({2, 2, 3, 3});
  NoGradGuard no_grad;
  EXPECT_LT(relative_error((*fused)(x), (*net)(x)), 1e-6);
}

class ZooFuseTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooFuseTest, FusedEqualsUnfusedAndNoBatchNormIsLeft) {
  manual_seed(12);
  nn::ModulePtr model = models::create(GetParam());
  randomise_batch_norms(*model);
  model->eval();
  auto gm = fx::symbolic_trace(model, randn({1, 3, 32, 32}));
  const size_t convs = count_modules(*gm, "Conv2d"), bns = count_modules(*gm, "BatchNorm2d");
  auto fused = fx::fuse_conv_bn(*gm);
  EXPECT_EQ(count_modules(*fused, "BatchNorm2d"), 0u);
  EXPECT_EQ(count_modules(*fused, "Conv2d"), convs);
  EXPECT_EQ(fused->graph().size(), gm->graph().size() - bns);
  const Tensor x = randn({1, 3, 32, 32});
  NoGradGuard no_grad;
  EXPECT_LT(relative_error((*fused)(x), (*model)(x)), 1e-5) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooFuseTest, ::testing::ValuesIn(models::model_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });
