// dequantization_aware_training: the deploy model of a trained QAT ResNet18 equals the QAT
// model's eval outputs (1e-5 relative), for every published configuration; its modules are
// DConv2d/DLinear with integer weights on their grids; the QAT model's state_dict round trip; errors.
#include <filesystem>
#include <unistd.h>

#include "quant/pass_test_util.h"

using namespace qflow;
using namespace qflow::quant;
using namespace pass_test;
using ::testing::HasSubstr;
using quant_test::error_of;

namespace {

const Tensor& example() {
  static const Tensor x = [] {
    manual_seed(11);
    return randn({2, 3, 32, 32});
  }();
  return x;
}

// A ResNet18 QAT model after `steps` SGD steps on a fixed batch of 4.
struct Trained {
  std::shared_ptr<fx::GraphModule> float_gm, qat;
};
Trained trained_resnet18(const QConfig& qc, int steps) {
  Trained t;
  t.float_gm = traced("resnet18", example(), 2);
  t.qat = quantization_aware_training(*t.float_gm, example(), qc);
  manual_seed(12);
  train_steps(*t.qat, randn({4, 3, 32, 32}), randint(0, 10, {4}), steps, 0.02);
  return t;
}

std::string temp_file(const char* name) {
  return (std::filesystem::temp_directory_path() / fmt::format("qflow_pass_{}_{}", name, ::getpid())).string();
}

}  // namespace

// One case per published configuration (a separate test each, to keep every test short).
class DeployEqualsQatEval : public ::testing::TestWithParam<QConfig> {};

TEST_P(DeployEqualsQatEval, OnResNet18AfterTraining) {
  const QConfig qc = GetParam();
  const Trained t = trained_resnet18(qc, 2);
  PassSummary s;
  auto deploy = dequantization_aware_training(*t.float_gm, *t.qat, example(), qc, &s);
  EXPECT_EQ(count_of(*deploy, "DConv2d"), 20);
  EXPECT_EQ(count_of(*deploy, "DLinear"), 1);
  EXPECT_EQ(s.count("DConv2d"), 20);
  EXPECT_EQ(s.batchnorm_folded, 20);
  for (const auto& [path, m] : deploy->named_modules()) {
    EXPECT_EQ(dynamic_cast<const QuantModule*>(m.get()), nullptr) << path;
    EXPECT_EQ(dynamic_cast<const Observer*>(m.get()), nullptr) << path;
  }
  t.qat->eval();
  deploy->eval();
  // The float simulation computes the QAT model's eval function with the same float operations;
  // the integer kernels (the default) compute it with exact sums (IntegerDeploy checks those).
  EXPECT_EQ(set_integer(*deploy, false), 21u);
  manual_seed(13);
  const Tensor x = randn({2, 3, 32, 32});
  NoGradGuard no_grad;
  expect_close_to_scale((*deploy)(x), (*t.qat)(x), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(PublishedConfigs, DeployEqualsQatEval,
                         ::testing::Values(QConfig{},                                          // symmetric/google per-layer
                                           QConfig{.per_layer = false},                        // symmetric/google per-channel
                                           QConfig{.scheme = Scheme::Affine},                  // affine/google per-layer
                                           QConfig{.scheme = Scheme::Affine, .per_layer = false},  // affine per-channel
                                           QConfig{.formula = Formula::Cambricon},             // symmetric/cambricon
                                           // Learned scales (Note [Learned scales]), trained by the steps.
                                           QConfig{.per_layer = false, .observer = ObserverKind::Lsq},
                                           QConfig{.bits = 4, .scheme = Scheme::Affine, .observer = ObserverKind::Lsq,
                                                   .learn_zero_point = true},
                                           QConfig{.bits = 4, .per_layer = false, .observer = ObserverKind::Tqt}),
                         [](const ::testing::TestParamInfo<QConfig>& info) {
                           const QConfig& q = info.param;
                           std::string name = fmt::format("{}_{}_{}", to_string(q.scheme), to_string(q.formula),
                                                          q.per_layer ? "per_layer" : "per_channel");
                           if (q.observer != QConfig{}.observer) name += fmt::format("_{}_{}bit", to_string(q.observer), q.bits);
                           return name;
                         });

// 4-bit weights, 8-bit activations (Note [Weight and activation bits]).
INSTANTIATE_TEST_SUITE_P(W4A8, DeployEqualsQatEval,
                         ::testing::Values(QConfig{.bits = 4, .activation_bits = 8},
                                           QConfig{.bits = 4, .per_layer = false, .activation_bits = 8}),
                         [](const ::testing::TestParamInfo<QConfig>& info) {
                           return info.param.per_layer ? "per_layer" : "per_channel";
                         });

TEST(DeployPassTest, DeployedModulesHoldTheTrainedStatistics) {
  const Trained t = trained_resnet18({.per_layer = false}, 2);
  const QConvBN& q = *t.qat->get_submodule<QConvBN>("layer1.0.conv2");
  const std::string qat_graph = t.qat->graph().to_string();
  const nn::StateDict qat_sd = t.qat->state_dict();
  PassSummary s;
  auto deploy = dequantization_aware_training(*t.float_gm, *t.qat, example(), {.per_layer = false}, &s);
  const DConv2d& d = *deploy->get_submodule<DConv2d>("layer1.0.conv2");
  EXPECT_EQ(to_vector<float>(d.input_scale), to_vector<float>(q.input_observer->calculate_qparams().scale));
  EXPECT_EQ(to_vector<float>(d.weight_scale), to_vector<float>(q.weight_observer->calculate_qparams().scale));
  EXPECT_EQ(d.weight_scale.numel(), 64);
  EXPECT_EQ(d.bias.numel(), 64);  // the folded BN shift
  // Same nodes, same names; the deploy meta shows the scales.
  EXPECT_EQ(deploy->graph().size(), t.qat->graph().size());
  const fx::NodeMeta& meta = deploy->graph().node("layer1_0_conv2").meta();
  EXPECT_FLOAT_EQ(static_cast<float>(std::get<double>(*meta.find("quant.input_scale"))), d.input_scale.item<float>());
  EXPECT_THAT(std::get<std::string>(*meta.find("quant.weight_scale")), HasSubstr("(64 ch)"));
  EXPECT_THAT(fx::to_dot(*deploy), HasSubstr("layer1_0_conv2\\nDConv2d (layer1.0.conv2)\\n[2, 64, 32, 32] float32\\nbits=8"));
  // The QAT model is untouched.
  EXPECT_EQ(t.qat->graph().to_string(), qat_graph);
  EXPECT_EQ(t.qat->get_submodule("layer1.0.conv2")->type_name(), "QConvBN");
  for (const auto& [k, v] : t.qat->state_dict())
    EXPECT_EQ(to_vector<double>(v.to(DType::Float64)), to_vector<double>(qat_sd.at(k).to(DType::Float64))) << k;
  // Summary rows.
  EXPECT_EQ(s.replaced.front().node, "conv1");
  EXPECT_EQ(s.replaced.front().from, "QConvBN");
  EXPECT_EQ(s.replaced.front().to, "DConv2d");
  EXPECT_EQ(s.replaced.front().folded, "conv1.bn");
  EXPECT_THAT(s.to_string(),
              HasSubstr("  21 replaced (20 DConv2d, 1 DLinear); 20 BatchNorm2d folded, 0 left; 21 layers run int8\n"));
  EXPECT_EQ(s.integer_layers, 21);
  EXPECT_TRUE(s.float_layers.empty());
}

// The summary names every layer the integer kernels cannot take, and why: affine QConfigs
// quantize weights with a zero point, which oneDNN 2.6's integer convolutions refuse.
TEST(DeployPassTest, SummarySaysWhichLayersRunTheFloatSimulation) {
  const QConfig qc{.scheme = Scheme::Affine};
  const Trained t = trained_resnet18(qc, 1);
  PassSummary s;
  auto deploy = dequantization_aware_training(*t.float_gm, *t.qat, example(), qc, &s);
  EXPECT_EQ(s.integer_layers + static_cast<int64_t>(s.float_layers.size()), 21);
  ASSERT_FALSE(s.float_layers.empty());
  EXPECT_EQ(s.float_layers.front(), "conv1: the weights have a zero point (affine weights)");
  EXPECT_THAT(s.to_string(), HasSubstr(fmt::format("; {} layers run int8, {} the float simulation:\n    conv1: the "
                                                   "weights have a zero point (affine weights)\n",
                                                   s.integer_layers, s.float_layers.size())));
  EXPECT_EQ(float_layers(*deploy), s.float_layers);
}

TEST(DeployPassTest, QatStateDictRoundTrip) {
  const Trained t = trained_resnet18({.scheme = Scheme::Affine}, 2);
  const std::string file = temp_file("qat.safetensors");
  nn::save(t.qat->state_dict(), file);
  // A fresh QAT model of another initialisation takes the saved state and computes the same.
  auto other = quantization_aware_training(*traced("resnet18", example(), 9), example(), {.scheme = Scheme::Affine});
  other->load_state_dict(nn::load(file));
  std::filesystem::remove(file);
  EXPECT_EQ(other->get_submodule<QConvBN>("conv1")->input_observer->num_observations(), 2);
  t.qat->eval();
  other->eval();
  NoGradGuard no_grad;
  const Tensor x = randn({2, 3, 32, 32});
  EXPECT_EQ(to_vector<float>((*other)(x)), to_vector<float>((*t.qat)(x)));
  // And the deploy models made from both are the same.
  auto d1 = dequantization_aware_training(*t.float_gm, *t.qat, example(), {.scheme = Scheme::Affine});
  auto d2 = dequantization_aware_training(*t.float_gm, *other, example(), {.scheme = Scheme::Affine});
  d1->eval();
  d2->eval();
  EXPECT_EQ(to_vector<float>((*d1)(x)), to_vector<float>((*d2)(x)));
}

TEST(DeployPassTest, ErrorsNameTheNodeAndTheProblem) {
  const Tensor ex = randn({1, 1, 28, 28});
  auto lenet = traced("lenet5", ex, 0, {.in_channels = 1, .image_size = 28});
  auto qat = quantization_aware_training(*lenet, ex, {});
  // Observers that never recorded.
  EXPECT_THAT(error_of([&] { dequantization_aware_training(*lenet, *qat, ex, {}); }),
              HasSubstr("observers have not recorded anything"));
  calibrate(*qat, std::vector<Tensor>{randn({2, 1, 28, 28})});
  // Another QConfig than the model's.
  EXPECT_THAT(error_of([&] { dequantization_aware_training(*lenet, *qat, ex, {.bits = 4}); }),
              HasSubstr("dequantization_aware_training: %conv1 (QConv2d at 'conv1') was built with QConfig(bits=8, "
                        "scheme=symmetric, formula=google, per_layer=true, momentum=0.95, ste=pure), not QConfig(bits=4"));
  // Another float model.
  auto alexnet = traced("alexnet", randn({1, 3, 32, 32}));
  EXPECT_THAT(error_of([&] { dequantization_aware_training(*alexnet, *qat, ex, {}); }),
              HasSubstr("the QAT model was not made from this float model"));
  auto d = dequantization_aware_training(*lenet, *qat, ex, {});
  EXPECT_EQ(count_of(*d, "DConv2d"), 2);
  EXPECT_EQ(count_of(*d, "DLinear"), 3);
}
