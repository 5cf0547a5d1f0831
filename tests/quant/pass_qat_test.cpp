// quantization_aware_training: the rewrite by data flow (Note [QAT rewrite]) on small nets and
// on the zoo's ResNet18 and MobileNetV2 — exact counts, readable paths, the input untouched,
// quant meta for to_dot, the summary table, and a QAT model that trains.
#include "quant/pass_test_util.h"

using namespace qflow;
using namespace qflow::quant;
using namespace pass_test;
using ::testing::HasSubstr;
using ::testing::Not;
using quant_test::error_of;
namespace F = qflow::nn::functional;

namespace {

// conv1 → (an unrelated op in between) → bn1; conv2 read by bn2 and by the add; a conv called
// twice (shared weights); a linear head.
struct Net : nn::Cloneable<Net> {
  std::shared_ptr<nn::Conv2d> conv1 = register_module("conv1", nn::Conv2d({.in = 2, .out = 3, .kernel = 3, .padding = 1}));
  std::shared_ptr<nn::BatchNorm2d> bn1 = register_module("bn1", nn::BatchNorm2d({.features = 3}));
  std::shared_ptr<nn::Conv2d> conv2 = register_module("conv2", nn::Conv2d({.in = 3, .out = 3, .kernel = 1}));
  std::shared_ptr<nn::BatchNorm2d> bn2 = register_module("bn2", nn::BatchNorm2d({.features = 3}));
  std::shared_ptr<nn::Conv2d> shared = register_module("shared", nn::Conv2d({.in = 3, .out = 3, .kernel = 1, .bias = false}));
  std::shared_ptr<nn::Linear> fc = register_module("fc", nn::Linear({.in = 3 * 4 * 4, .out = 5}));
  Tensor forward(const Tensor& x) override {
    Tensor c = (*conv1)(x);
    Tensor side = F::relu(x).sum();       // traced between conv1 and bn1
    Tensor y = F::relu((*bn1)(c)) + side;
    Tensor z = (*conv2)(y);
    Tensor w = (*bn2)(z) + z;             // conv2 has two users: not folded
    w = (*shared)((*shared)(w));
    return (*fc)(w.view({w.size(0), -1}));
  }
};

std::shared_ptr<fx::GraphModule> traced_net() {
  manual_seed(3);
  return fx::symbolic_trace(std::make_shared<Net>(), randn({2, 2, 4, 4}));
}

std::string type_at(const fx::GraphModule& gm, const std::string& path) { return gm.get_submodule(path)->type_name(); }

}  // namespace

TEST(QatPassTest, RewritesByDataFlowOnASmallNet) {
  auto gm = traced_net();
  PassSummary s;
  auto qat = quantization_aware_training(*gm, randn({2, 2, 4, 4}), {}, &s);
  EXPECT_EQ(type_at(*qat, "conv1"), "QConvBN");  // bn1 is conv1's only user, though not its next node
  EXPECT_EQ(type_at(*qat, "conv2"), "QConv2d");  // conv2's output is also read by the add
  EXPECT_EQ(type_at(*qat, "bn2"), "BatchNorm2d");
  EXPECT_EQ(type_at(*qat, "shared"), "QConv2d");
  EXPECT_EQ(type_at(*qat, "fc"), "QLinear");
  EXPECT_THAT(error_of([&] { qat->get_submodule("bn1"); }), HasSubstr("bn1"));
  EXPECT_EQ(qat->graph().find_node("bn1"), nullptr);
  // Both calls of the shared conv still share one module.
  EXPECT_EQ(qat->graph().node("shared").target(), "shared");
  EXPECT_EQ(qat->graph().node("shared_1").target(), "shared");
  EXPECT_EQ(s.count("QConvBN"), 1);
  EXPECT_EQ(s.count("QConv2d"), 3);  // conv2 and the two calls of shared
  EXPECT_EQ(s.count("QLinear"), 1);
  EXPECT_EQ(s.batchnorm_folded, 1);
  EXPECT_EQ(s.batchnorm_left, 1);
  EXPECT_EQ(s.conv_left, 0);
  EXPECT_EQ(s.linear_left, 0);
  ASSERT_EQ(s.replaced.size(), 5u);
  EXPECT_EQ(s.replaced[0].node, "conv1");
  EXPECT_EQ(s.replaced[0].from, "Conv2d + BatchNorm2d");
  EXPECT_EQ(s.replaced[0].folded, "bn1");
  EXPECT_EQ(s.replaced[4].node, "fc");
  EXPECT_EQ(s.replaced[4].to, "QLinear");
  qat->graph().lint(qat.get());
}

TEST(QatPassTest, WithFakeQuantOffTheQatModelComputesTheFloatModel) {
  auto gm = traced_net();
  auto qat = quantization_aware_training(*gm, randn({2, 2, 4, 4}), {});
  EXPECT_EQ(enable_fake_quant(*qat, false), 4);  // conv1, conv2, shared (once), fc
  const Tensor x = randn({3, 2, 4, 4});
  for (bool training : {true, false}) {
    gm->train(training);
    qat->train(training);
    quant_test::expect_close((*qat)(x), (*gm)(x), 1e-5, 1e-5, training ? "train" : "eval");
  }
}

TEST(QatPassTest, ResNet18ExactCountsAndReadablePaths) {
  const Tensor example = randn({2, 3, 32, 32});
  auto gm = traced("resnet18", example);
  PassSummary s;
  auto qat = quantization_aware_training(*gm, example, {}, &s);
  EXPECT_EQ(count_of(*qat, "QConvBN"), 20);
  EXPECT_EQ(count_of(*qat, "QLinear"), 1);
  EXPECT_EQ(count_of(*qat, "QConv2d"), 0);
  EXPECT_EQ(count_of(*qat, "BatchNorm2d"), 0);
  EXPECT_EQ(count_of(*qat, "Conv2d"), 0);
  EXPECT_EQ(count_of(*qat, "Linear"), 0);
  EXPECT_EQ(qat->graph().size(), gm->graph().size() - 20);
  EXPECT_EQ(s.count("QConvBN"), 20);
  EXPECT_EQ(s.count("QLinear"), 1);
  EXPECT_EQ(s.batchnorm_folded, 20);
  EXPECT_EQ(s.batchnorm_left, 0);
  // The QConvBN takes the conv's place: same node name, same path, BN state under ".bn".
  EXPECT_EQ(type_at(*qat, "layer2.0.shortcut.0"), "QConvBN");
  EXPECT_EQ(qat->graph().node("layer2_0_shortcut_0").target(), "layer2.0.shortcut.0");
  const nn::StateDict sd = qat->state_dict();
  for (const char* key : {"conv1.weight", "conv1.bn.weight", "conv1.bn.running_mean", "conv1.bn.num_batches_tracked",
                          "conv1.input_observer.min_val", "conv1.weight_observer.max_val",
                          "layer2.0.shortcut.0.bn.running_var", "linear.weight", "linear.bias",
                          "linear.input_observer.num_batches_tracked"})
    EXPECT_TRUE(sd.contains(key)) << key;
  EXPECT_FALSE(sd.contains("bn1.weight"));
  EXPECT_FALSE(sd.contains("layer2.0.shortcut.1.weight"));
  // The float values came along: conv1's weight and bn1's running_var.
  const nn::StateDict fsd = gm->state_dict();
  EXPECT_EQ(to_vector<float>(sd.at("conv1.weight")), to_vector<float>(fsd.at("conv1.weight")));
  EXPECT_EQ(to_vector<float>(sd.at("conv1.bn.running_var")), to_vector<float>(fsd.at("bn1.running_var")));
  // Summary table: one row per node, then the totals.
  const std::string table = s.to_string();
  EXPECT_THAT(table, HasSubstr("quantization_aware_training: QConfig(bits=8, scheme=symmetric, formula=google, "
                               "per_layer=true, momentum=0.95, ste=pure)\n"));
  EXPECT_THAT(table, HasSubstr("node"));
  EXPECT_THAT(table, HasSubstr("layer2.0.shortcut.0 (layer2.0.shortcut.1 folded)"));
  EXPECT_THAT(table, HasSubstr("  21 replaced (20 QConvBN, 1 QLinear); 20 BatchNorm2d folded, 0 left\n"));
}

TEST(QatPassTest, TheInputGraphModuleIsUntouched) {
  const Tensor example = randn({2, 3, 32, 32});
  auto gm = traced("resnet18", example);
  gm->eval();
  const std::string graph_before = gm->graph().to_string();
  const nn::StateDict before = gm->state_dict();
  std::map<std::string, std::vector<float>> values;
  for (const auto& [k, t] : before) values[k] = to_vector<float>(t.to(DType::Float32));
  const Tensor x = randn({2, 3, 32, 32});
  const Tensor out_before = (*gm)(x);

  auto qat = quantization_aware_training(*gm, example, {});
  EXPECT_FALSE(qat->is_training());  // modes are copied
  qat->train();
  train_steps(*qat, x, from_vector<int64_t>({1, 2}, {2}), 1);

  EXPECT_EQ(gm->graph().to_string(), graph_before);
  EXPECT_EQ(type_at(*gm, "conv1"), "Conv2d");
  EXPECT_EQ(type_at(*gm, "bn1"), "BatchNorm2d");
  EXPECT_FALSE(gm->is_training());
  const nn::StateDict after = gm->state_dict();
  ASSERT_EQ(after.keys(), before.keys());
  for (const auto& [k, t] : after) EXPECT_EQ(to_vector<float>(t.to(DType::Float32)), values[k]) << k;
  EXPECT_EQ(to_vector<float>((*gm)(x)), to_vector<float>(out_before));
}

TEST(QatPassTest, NodesCarryQuantMetaThatToDotDraws) {
  const Tensor example = randn({2, 3, 32, 32});
  auto gm = traced("resnet18", example);
  const QConfig qc{.bits = 4, .scheme = Scheme::Affine, .per_layer = false};
  auto qat = quantization_aware_training(*gm, example, qc);
  const fx::NodeMeta& meta = qat->graph().node("conv1").meta();
  EXPECT_EQ(std::get<double>(*meta.find("quant.bits")), 4.0);
  EXPECT_EQ(std::get<std::string>(*meta.find("quant.scheme")), "affine");
  EXPECT_EQ(std::get<std::string>(*meta.find("quant.formula")), "google");
  EXPECT_EQ(std::get<std::string>(*meta.find("quant.granularity")), "per-channel");
  EXPECT_EQ(meta.find("quant.input_scale"), nullptr);  // nothing observed yet
  EXPECT_EQ(meta.shape(), (std::vector<int64_t>{2, 64, 32, 32}));
  EXPECT_EQ(qat->graph().node("relu").meta().find("quant.bits"), nullptr);
  std::string dot = fx::to_dot(*qat);
  EXPECT_THAT(dot, HasSubstr("conv1\\nQConvBN (conv1)\\n[2, 64, 32, 32] float32\\nbits=4 formula=google "
                             "granularity=per-channel scheme=affine\""));
  EXPECT_THAT(dot, HasSubstr("penwidth=2.5"));

  // After a training step the observers know the scales; annotate_quant_meta shows them.
  train_steps(*qat, randn({2, 3, 32, 32}), from_vector<int64_t>({0, 3}, {2}), 1);
  EXPECT_EQ(annotate_quant_meta(*qat), 21);
  const QConvBN& conv1 = *qat->get_submodule<QConvBN>("conv1");
  const QParams in = conv1.input_observer->calculate_qparams();
  EXPECT_FLOAT_EQ(static_cast<float>(std::get<double>(*meta.find("quant.input_scale"))), in.scale.item<float>());
  EXPECT_FLOAT_EQ(static_cast<float>(std::get<double>(*meta.find("quant.input_zero_point"))), in.zero_point.item<float>());
  const std::vector<float> ws = to_vector<float>(conv1.weight_observer->calculate_qparams().scale);
  EXPECT_EQ(std::get<std::string>(*meta.find("quant.weight_scale")),
            fmt::format("{:.4g}..{:.4g} (64 ch)", *std::min_element(ws.begin(), ws.end()),
                        *std::max_element(ws.begin(), ws.end())));
  dot = fx::to_dot(*qat);
  EXPECT_THAT(dot, HasSubstr("input_scale="));
  EXPECT_THAT(dot, HasSubstr("weight_scale="));
}

TEST(QatPassTest, ResNet18QatModelTrains) {
  const Tensor example = randn({4, 3, 32, 32});
  auto gm = traced("resnet18", example, 1);
  auto qat = quantization_aware_training(*gm, example, {});
  manual_seed(5);
  const Tensor images = randn({4, 3, 32, 32});
  const Tensor labels = randint(0, 10, {4});
  const std::vector<double> losses = train_steps(*qat, images, labels, 4, 0.02);
  for (double l : losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_LT(losses.back(), 0.7 * losses.front()) << fmt::format("{}", fmt::join(losses, ", "));
  // The observers and BN statistics moved with training.
  const QConvBN& conv1 = *qat->get_submodule<QConvBN>("conv1");
  EXPECT_EQ(conv1.input_observer->num_observations(), 4);
  EXPECT_EQ(conv1.bn->num_batches_tracked.item<int64_t>(), 4);
  EXPECT_EQ(qat->get_submodule<QLinear>("linear")->weight_observer->num_observations(), 4);
}

TEST(QatPassTest, MobileNetV2Converts) {
  const Tensor example = randn({2, 3, 32, 32});
  auto gm = traced("mobilenet_v2", example);
  const int convs = count_of(*gm, "Conv2d");
  ASSERT_EQ(count_of(*gm, "BatchNorm2d"), convs);  // every conv is followed by its BN
  PassSummary s;
  auto qat = quantization_aware_training(*gm, example, {.per_layer = false}, &s);
  EXPECT_EQ(count_of(*qat, "QConvBN"), convs);
  EXPECT_EQ(count_of(*qat, "QLinear"), 1);
  EXPECT_EQ(count_of(*qat, "BatchNorm2d"), 0);
  EXPECT_EQ(s.count("QConvBN"), convs);
  EXPECT_EQ(s.batchnorm_left, 0);
  // Depthwise convs keep their groups.
  bool depthwise = false;
  for (const auto& [path, m] : qat->named_modules())
    if (auto q = std::dynamic_pointer_cast<QConvBN>(m); q && q->conv_options().groups > 1) depthwise = true;
  EXPECT_TRUE(depthwise);
  const Tensor x = randn({2, 3, 32, 32});
  qat->train();
  const Tensor y = (*qat)(x);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 10}));
}

TEST(QatPassTest, RejectsAnInvalidQConfigAndAMissingExample) {
  auto gm = traced_net();
  EXPECT_THAT(error_of([&] { quantization_aware_training(*gm, randn({2, 2, 4, 4}), {.bits = 1}); }), HasSubstr("bits"));
  EXPECT_THAT(error_of([&] { quantization_aware_training(*gm, Tensor(), {}); }),
              HasSubstr("quantization_aware_training: the example input is undefined"));
}

TEST(QatPassTest, PassesDoNotMoveTheCallersRandomStream) {
  auto gm = traced_net();
  const Tensor ex = randn({2, 2, 4, 4});
  manual_seed(7);
  const std::vector<float> want = to_vector<float>(randn({4}));
  manual_seed(7);
  auto qat = quantization_aware_training(*gm, ex, {});
  auto ptq = prepare_ptq(*gm, ex, {});
  calibrate(*qat, std::vector<Tensor>{ex});
  auto deploy = dequantization_aware_training(*gm, *qat, ex, {});
  EXPECT_EQ(to_vector<float>(randn({4})), want);
}
