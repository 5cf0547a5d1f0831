// The passes under a QConfig mapping (Note [Per-layer passes]): per-layer bits end to end
// (QAT, training, deploy, integer kernels), layers left float, the deploy pass's check
// against the mapping, PTQ, and a model with two inputs and two outputs.
#include <set>

#include "quant/pass_test_util.h"
#include "qflow/quant/deploy.h"

using namespace qflow;
using namespace qflow::quant;
using namespace pass_test;
using ::testing::HasSubstr;
using quant_test::error_of;
namespace F = qflow::nn::functional;

namespace {

struct Net : nn::Cloneable<Net> {
  std::shared_ptr<nn::Conv2d> conv1 = register_module("conv1", nn::Conv2d({.in = 1, .out = 6, .kernel = 3, .padding = 1}));
  std::shared_ptr<nn::BatchNorm2d> bn1 = register_module("bn1", nn::BatchNorm2d({.features = 6}));
  std::shared_ptr<nn::Conv2d> conv2 = register_module("conv2", nn::Conv2d({.in = 6, .out = 8, .kernel = 3, .padding = 1}));
  std::shared_ptr<nn::BatchNorm2d> bn2 = register_module("bn2", nn::BatchNorm2d({.features = 8}));
  std::shared_ptr<nn::Conv2d> conv3 = register_module("conv3", nn::Conv2d({.in = 8, .out = 4, .kernel = 1}));
  std::shared_ptr<nn::Linear> fc1 = register_module("fc1", nn::Linear({.in = 4 * 8 * 8, .out = 16}));
  std::shared_ptr<nn::Linear> fc2 = register_module("fc2", nn::Linear({.in = 16, .out = 10}));
  Tensor forward(const Tensor& x) override {
    Tensor y = F::relu((*bn1)((*conv1)(x)));
    y = F::relu((*bn2)((*conv2)(y)));
    y = F::relu((*conv3)(y));
    return (*fc2)(F::relu((*fc1)(y.view({y.size(0), -1}))));
  }
};

const QConfig k8{};
const QConfig k4{.bits = 4};

// 4 bits everywhere, 8 for the first and last layers, conv3 float.
QConfigMapping mixed() {
  QConfigMapping m(k4);
  m.set_path("conv1", k8).set_path("fc2", k8).set_path_regex("conv3", std::nullopt);
  return m;
}

Tensor example() { return zeros({1, 1, 8, 8}); }

std::shared_ptr<fx::GraphModule> traced_net() {
  manual_seed(4);
  return fx::symbolic_trace(std::make_shared<Net>(), example());
}

const QConfig& qconfig_at(const fx::GraphModule& gm, const std::string& path) {
  const auto* q = dynamic_cast<const QuantModule*>(gm.get_submodule(path).get());
  QFLOW_CHECK(q != nullptr, "no Q module at {}", path);
  return q->qconfig();
}

std::set<float> distinct(const Tensor& t) {
  const auto v = to_vector<float>(t.to(DType::Float32));
  return {v.begin(), v.end()};
}

}  // namespace

TEST(MappingPassTest, QatGivesEachLayerItsQConfigAndLeavesNoneFloat) {
  auto gm = traced_net();
  PassSummary s;
  auto qat = quantization_aware_training(*gm, example(), mixed(), &s);
  EXPECT_EQ(qat->get_submodule("conv1")->type_name(), "QConvBN");
  EXPECT_EQ(qconfig_at(*qat, "conv1"), k8);
  EXPECT_EQ(qconfig_at(*qat, "conv2"), k4);
  EXPECT_EQ(qat->get_submodule("conv3")->type_name(), "Conv2d");
  EXPECT_EQ(qconfig_at(*qat, "fc1"), k4);
  EXPECT_EQ(qconfig_at(*qat, "fc2"), k8);
  ASSERT_EQ(s.replaced.size(), 4u);
  ASSERT_EQ(s.left_float.size(), 1u);
  EXPECT_EQ(s.left_float[0].node, "conv3");
  EXPECT_EQ(s.replaced[0].qconfig, k8);
  EXPECT_EQ(s.replaced[1].qconfig, k4);
  EXPECT_EQ(s.conv_left, 1);
  const std::string table = s.to_string();
  EXPECT_THAT(table, HasSubstr("quantization_aware_training: QConfig(bits=4,"));
  EXPECT_THAT(table, HasSubstr("  rule path 'conv1': QConfig(bits=8,"));
  EXPECT_THAT(table, HasSubstr("  rule path_regex 'conv3': float\n"));
  EXPECT_THAT(table, HasSubstr("  conv2 Conv2d + BatchNorm2d QConvBN conv2 (bn2 folded) global\n"));
  EXPECT_THAT(table, HasSubstr("  conv3 Conv2d               Conv2d  conv3              float\n"));
  EXPECT_THAT(table, HasSubstr("; 1 Conv2d and 0 Linear left in float (by the QConfig mapping)"));
  // A rule that selects nothing is refused by the pass, which lists the layers it could mean.
  EXPECT_THAT(error_of([&] { quantization_aware_training(*gm, example(), QConfigMapping(k8).set_path("conv4", k4)); }),
              HasSubstr("quantization_aware_training: the QConfig mapping's rule path 'conv4' selects no layer the pass "
                        "quantizes; the 5 such layers include conv1 (Conv2d), conv2 (Conv2d), conv3 (Conv2d)"));
}

// Trained, deployed and run in integers: the 4-bit layers' weights take at most 16 values,
// every quantized layer (4 or 8 bits) runs the integer kernels, conv3 stays a float Conv2d.
TEST(MappingPassTest, PerLayerBitsHoldEndToEnd) {
  auto gm = traced_net();
  auto qat = quantization_aware_training(*gm, example(), mixed());
  manual_seed(7);
  const Tensor images = randn({8, 1, 8, 8}), labels = randint(0, 10, {8});
  const auto losses = train_steps(*qat, images, labels, 4, 0.02);
  EXPECT_LT(losses.back(), losses.front());
  PassSummary s;
  auto deploy = dequantization_aware_training(*gm, *qat, example(), mixed(), &s);
  EXPECT_EQ(deploy->get_submodule("conv3")->type_name(), "Conv2d");
  EXPECT_EQ(s.integer_layers, 4);
  EXPECT_TRUE(s.float_layers.empty()) << fmt::format("{}", fmt::join(s.float_layers, "; "));
  for (const char* path : {"conv2", "fc1"}) {
    const std::set<float> values = distinct(deploy->state_dict().at(std::string(path) + ".weight"));
    EXPECT_LE(values.size(), 16u) << path;
    EXPECT_GE(*values.begin(), -8.0f) << path;
    EXPECT_LE(*values.rbegin(), 7.0f) << path;
  }
  for (const char* path : {"conv1", "fc2"})
    EXPECT_GT(distinct(deploy->state_dict().at(std::string(path) + ".weight")).size(), 16u) << path;
  // The deploy model computes the QAT model's eval output, in integers as in the simulation.
  const Tensor x = randn({4, 1, 8, 8});
  qat->eval();
  deploy->eval();
  NoGradGuard no_grad;
  const Tensor want = (*qat)(x);
  set_integer(*deploy, false);
  expect_close_to_scale((*deploy)(x), want, 1e-5);
  set_integer(*deploy, true);
  fuse_integer_layers(*deploy);
  expect_close_to_scale((*deploy)(x), want, 0.05);
}

TEST(MappingPassTest, DeployRefusesAnotherMappingNamingTheNode) {
  auto gm = traced_net();
  auto qat = quantization_aware_training(*gm, example(), mixed());
  calibrate(*qat, std::vector<Tensor>{randn({2, 1, 8, 8})});
  EXPECT_THAT(error_of([&] { dequantization_aware_training(*gm, *qat, example(), QConfigMapping(mixed()).set_global(k8)); }),
              HasSubstr("%conv2 (QConvBN at 'conv2') was built with QConfig(bits=4, scheme=symmetric, formula=google, "
                        "per_layer=true, momentum=0.95, ste=pure), not QConfig(bits=8"));
  QConfigMapping conv3_quantized(k4);
  conv3_quantized.set_path("conv1", k8).set_path("fc2", k8);
  EXPECT_THAT(error_of([&] { dequantization_aware_training(*gm, *qat, example(), conv3_quantized); }),
              HasSubstr("%conv3 (Conv2d at 'conv3') is float in the QAT model, but the mapping's global quantizes it "
                        "with QConfig(bits=4"));
  EXPECT_NO_THROW(dequantization_aware_training(*gm, *qat, example(), mixed()));
}

TEST(MappingPassTest, PtqHonoursTheMapping) {
  auto gm = traced_net();
  PassSummary s;
  auto ptq = prepare_ptq(*gm, example(), mixed(), &s);
  EXPECT_EQ(ptq->get_submodule("conv1")->type_name(), "QConv2d");
  EXPECT_EQ(qconfig_at(*ptq, "conv1"), k8);
  EXPECT_EQ(qconfig_at(*ptq, "conv2"), k4);
  EXPECT_EQ(ptq->get_submodule("conv3")->type_name(), "Conv2d");
  EXPECT_EQ(s.batchnorm_folded, 2);
  calibrate(*ptq, std::vector<Tensor>{randn({4, 1, 8, 8})});
  auto deploy = dequantization_aware_training(*gm, *ptq, example(), mixed());
  EXPECT_EQ(count_of(*deploy, "DConv2d"), 2);
  EXPECT_EQ(count_of(*deploy, "DLinear"), 2);
}

namespace {

// Two inputs (an image and a feature vector), two outputs (logits and an auxiliary head).
struct TwoInTwoOut : nn::Cloneable<TwoInTwoOut> {
  std::shared_ptr<nn::Conv2d> conv = register_module("conv", nn::Conv2d({.in = 1, .out = 4, .kernel = 3, .padding = 1}));
  std::shared_ptr<nn::BatchNorm2d> bn = register_module("bn", nn::BatchNorm2d({.features = 4}));
  std::shared_ptr<nn::Linear> fc_img = register_module("fc_img", nn::Linear({.in = 4 * 6 * 6, .out = 5}));
  std::shared_ptr<nn::Linear> fc_feat = register_module("fc_feat", nn::Linear({.in = 6, .out = 5}));
  std::shared_ptr<nn::Linear> head = register_module("head", nn::Linear({.in = 5, .out = 3}));
  TensorList forward_list(const TensorList& in) override {
    const Tensor a = F::relu((*bn)((*conv)(in[0])));
    const Tensor f = F::relu((*fc_feat)(in[1]));
    return {(*fc_img)(a.view({a.size(0), -1})) + f, (*head)(f)};
  }
};

}  // namespace

TEST(MappingPassTest, TwoInputsAndTwoOutputsGoThroughEveryPass) {
  manual_seed(2);
  const TensorList ex{zeros({1, 1, 6, 6}), zeros({1, 6})};
  auto gm = fx::symbolic_trace(std::make_shared<TwoInTwoOut>(), ex);
  PassSummary s;
  auto qat = quantization_aware_training(*gm, ex, QConfigMapping(k8), &s);
  EXPECT_EQ(s.count("QConvBN"), 1);
  EXPECT_EQ(s.count("QLinear"), 3);
  const TensorList x{randn({3, 1, 6, 6}), randn({3, 6})};
  qat->train();
  EXPECT_EQ(qat->call(x).size(), 2u);
  auto ptq = prepare_ptq(*gm, ex, QConfigMapping(k8));
  EXPECT_EQ(calibrate(*ptq, std::vector<TensorList>{x}), 1);
  auto deploy = dequantization_aware_training(*gm, *ptq, ex, QConfigMapping(k8));
  deploy->eval();
  ptq->eval();
  NoGradGuard no_grad;
  const TensorList got = deploy->call(x), want = ptq->call(x);
  ASSERT_EQ(got.size(), 2u);
  for (size_t k = 0; k < 2; ++k) expect_close_to_scale(got[k], want[k], 0.05);
  EXPECT_THAT(error_of([&] { quantization_aware_training(*gm, TensorList{ex[0]}, QConfigMapping(k8)); }),
              HasSubstr("quantization_aware_training: the model takes 2 inputs but 1 example inputs were given"));
}
