// QConv2d and QLinear: construction from float modules, the quantized forward against the
// op-by-op computation, the float path with fake quantization off (values and gradcheck), STE
// gradients, state_dict layout, cloning, fx leaves.
#include "nn/golden_util.h"
#include "qflow/autograd/gradcheck.h"
#include "qflow/fx/fx.h"
#include "quant/quant_test_util.h"

using namespace qflow;
using namespace qflow::quant;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using nn_golden::seq;
using quant_test::values;

namespace {

std::vector<std::string> keys(const nn::Module& m) { return m.state_dict().keys(); }

// fake_quantize(t) with the range of t itself, the way a fresh observer sees its first tensor.
Tensor fq_own_range(const Tensor& t, const QConfig& qc, bool per_channel) {
  const Range r = tensor_range(t, per_channel);
  return fake_quantize(t.detach(), compute_qparams(r.min, r.max, qc), qc);
}

TEST(QConv2dTest, FromFloatCopiesOptionsAndParameters) {
  nn::Conv2d conv({.in = 2, .out = 3, .kernel = 3, .stride = 2, .padding = 1});
  auto q = QConv2d::from_float(conv, {.bits = 4});
  EXPECT_EQ(q->options().stride, nn::Size2(2));
  EXPECT_THAT(values(q->weight), ::testing::ElementsAreArray(values(conv.weight)));
  EXPECT_THAT(values(q->bias), ::testing::ElementsAreArray(values(conv.bias)));
  EXPECT_FALSE(q->weight.is_same(conv.weight));
  EXPECT_TRUE(q->weight.requires_grad());
  EXPECT_EQ(q->qconfig().bits, 4);
  EXPECT_EQ(keys(*q), (std::vector<std::string>{
                          "weight", "bias", "input_observer.min_val", "input_observer.max_val",
                          "input_observer.num_batches_tracked", "input_observer.frozen", "weight_observer.min_val",
                          "weight_observer.max_val", "weight_observer.num_batches_tracked", "weight_observer.frozen"}));
  EXPECT_EQ(q->repr(),
            "QConv2d(\n"
            "  2, 3, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), bits=4, scheme=symmetric, formula=google, "
            "per_layer=True\n"
            "  (input_observer): MovingAverageMinMaxObserver(bits=4, scheme=symmetric, formula=google, momentum=0.95)\n"
            "  (weight_observer): MinMaxObserver(bits=4, scheme=symmetric, formula=google)\n)");
}

TEST(QConv2dTest, QuantizedForwardIsConvOfFakeQuantizedInputAndWeight) {
  for (const QConfig qc : {QConfig{}, QConfig{.bits = 4, .scheme = Scheme::Affine, .per_layer = false},
                           QConfig{.formula = Formula::Cambricon, .per_layer = false}}) {
    SCOPED_TRACE(qc.to_string());
    nn::Conv2d conv({.in = 2, .out = 3, .kernel = 3, .padding = 1});
    auto q = QConv2d::from_float(conv, qc);
    const Tensor x = seq({2, 2, 5, 5}, 0.3, 2.0);
    const Tensor got = (*q)(x);
    const Tensor want = F::conv2d(fq_own_range(x, qc, false), fq_own_range(conv.weight, qc, !qc.per_layer), conv.bias,
                                  {1}, 1, {1}, 1);
    quant_test::expect_close(got, want, 0.0);
    EXPECT_EQ(q->weight_observer->min_val().numel(), qc.per_layer ? 1 : 3);
  }
}

// W4A8 (Note [Weight and activation bits]): the input on the 8-bit grid, the weight on the 4-bit.
TEST(QConv2dTest, ActivationBitsQuantizeTheInputOnTheirOwnGrid) {
  const QConfig w4a8{.bits = 4, .activation_bits = 8};
  nn::Conv2d conv({.in = 2, .out = 3, .kernel = 3, .padding = 1});
  auto q = QConv2d::from_float(conv, w4a8);
  const Tensor x = seq({2, 2, 5, 5}, 0.3, 2.0);
  const Tensor got = (*q)(x);
  const Tensor want = F::conv2d(fq_own_range(x, QConfig{.bits = 8}, false), fq_own_range(conv.weight, QConfig{.bits = 4}, false),
                                conv.bias, {1}, 1, {1}, 1);
  quant_test::expect_close(got, want, 0.0);
  // Scales by hand: max |x| / 127 for the input, max |w| / 7 for the weight.
  float x_absmax = 0, w_absmax = 0;
  for (float v : values(x)) x_absmax = std::max(x_absmax, std::abs(v));
  for (float w : values(conv.weight)) w_absmax = std::max(w_absmax, std::abs(w));
  EXPECT_FLOAT_EQ(values(q->input_observer->calculate_qparams().scale)[0], x_absmax / 127.0f);
  EXPECT_FLOAT_EQ(values(q->weight_observer->calculate_qparams().scale)[0], w_absmax / 7.0f);
  EXPECT_THAT(q->repr(), HasSubstr("bits=4, activation_bits=8, scheme=symmetric"));
  EXPECT_THAT(q->repr(), HasSubstr("(input_observer): MovingAverageMinMaxObserver(bits=8, "));
}

TEST(QConv2dTest, FakeQuantDisabledIsTheFloatConvWithGradients) {
  nn::Conv2d conv({.in = 2, .out = 2, .kernel = 3, .padding = 1, .groups = 2});
  auto q = QConv2d::from_float(conv, {});
  EXPECT_EQ(enable_fake_quant(*q, false), 1);
  const Tensor x = seq({2, 2, 4, 4}, 0.1);
  quant_test::expect_close((*q)(x), conv(x), 0.0);
  EXPECT_EQ(q->input_observer->num_observations(), 1);  // observers keep recording
  q->to(DType::Float64);
  Tensor xd = x.to(DType::Float64).requires_grad_();
  EXPECT_TRUE(gradcheck([&](const TensorList& in) { return (*q)(in[0]); }, {xd, q->weight, q->bias}));
}

TEST(QLinearTest, QuantizedForwardAndStraightThroughGradients) {
  nn::Linear linear({.in = 4, .out = 3});
  const QConfig qc{.bits = 3, .per_layer = false};
  auto q = QLinear::from_float(linear, qc);
  const Tensor x = seq({2, 4}, 0.7, 1.5).requires_grad_();
  const Tensor y = (*q)(x);
  const Tensor xq = fq_own_range(x, qc, false), wq = fq_own_range(linear.weight, qc, true);
  quant_test::expect_close(y, F::linear(xq, wq, linear.bias), 0.0);
  // Pure STE: the gradients of linear evaluated at the quantized operands.
  const Tensor g = seq({2, 3}, 1.9);
  y.backward(g);
  quant_test::expect_close(x.grad(), g.mm(wq), 1e-6, 1e-7);
  quant_test::expect_close(q->weight.grad(), g.t().mm(xq), 1e-6, 1e-7);
  quant_test::expect_close(q->bias.grad(), g.sum({0}), 1e-6, 1e-7);
}

TEST(QLinearTest, ClippedEstimatorZeroesGradientsOutsideTheGrid) {
  // An input observer frozen at [-1, 1] (3 bits, scale 1/3, grid [-4, 3]): inputs below -1.5 or
  // above 7/6 are clipped.
  auto q = std::make_shared<QLinear>(nn::LinearOptions{.in = 3, .out = 1, .bias = false},
                                     QConfig{.bits = 3, .ste = Ste::Clipped});
  q->input_observer->module()(quant_test::vec({-1.0f, 1.0f}));
  q->input_observer->freeze();
  {
    NoGradGuard no_grad;
    q->weight.fill_(1.0);
  }
  const Tensor x = quant_test::vec({0.5f, -1.6f, 0.9f}).reshape({1, 3}).requires_grad_();
  (*q)(x).sum().backward();
  EXPECT_THAT(values(x.grad()), ElementsAre(1.0f, 0.0f, 1.0f));  // -1.6 · 3 = -4.8 → -5 < -4
}

TEST(QLinearTest, FloatPathGradcheckAndRepr) {
  auto q = std::make_shared<QLinear>(nn::LinearOptions{.in = 3, .out = 2}, QConfig{.scheme = Scheme::Affine});
  EXPECT_EQ(q->extra_repr(), "in_features=3, out_features=2, bias=True, bits=8, scheme=affine, formula=google, per_layer=True");
  q->enable_fake_quant(false);
  EXPECT_THAT(q->extra_repr(), HasSubstr("fake_quant=False"));
  q->to(DType::Float64);
  Tensor x = seq({2, 3}, 0.2, 1.0, DType::Float64).requires_grad_();
  EXPECT_TRUE(gradcheck([&](const TensorList& in) { return (*q)(in[0]); }, {x, q->weight, q->bias}));
}

TEST(QModulesTest, CloneIsDeepAndKeepsStatistics) {
  auto q = std::make_shared<QConv2d>(nn::Conv2dOptions{.in = 1, .out = 2, .kernel = 1}, QConfig{.bits = 5});
  (*q)(seq({1, 1, 2, 2}, 0.4));
  q->enable_fake_quant(false);
  auto c = std::dynamic_pointer_cast<QConv2d>(q->clone());
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(c->weight.is_same(q->weight));
  EXPECT_FALSE(c->input_observer->min_val().is_same(q->input_observer->min_val()));
  EXPECT_EQ(c->input_observer->num_observations(), 1);
  EXPECT_EQ(c->qconfig().bits, 5);
  EXPECT_FALSE(c->fake_quant_enabled());
  EXPECT_THAT(values(c->weight), ::testing::ElementsAreArray(values(q->weight)));
}

struct TwoLayer : nn::Cloneable<TwoLayer> {
  std::shared_ptr<QConv2d> conv = register_module("conv", QConv2d({.in = 1, .out = 2, .kernel = 3, .padding = 1}));
  std::shared_ptr<QLinear> fc = register_module("fc", QLinear({.in = 8, .out = 3}));
  Tensor forward(const Tensor& x) override {
    const Tensor y = F::relu((*conv)(x));
    return (*fc)(y.view({y.size(0), -1}));
  }
};

TEST(QModulesTest, AreFxLeavesAndTheGraphRunsThem) {
  auto net = std::make_shared<TwoLayer>();
  const Tensor x = seq({2, 1, 2, 2}, 0.5);
  auto gm = fx::symbolic_trace(net, x);
  std::vector<std::string> modules;
  for (const fx::Node* n : gm->graph().nodes())
    if (n->op() == fx::NodeOp::CallModule) modules.push_back(n->target());
  EXPECT_EQ(modules, (std::vector<std::string>{"conv", "fc"}));
  EXPECT_EQ(net->conv->input_observer->num_observations(), 0);  // tracing changes no statistics
  net->eval();
  quant_test::expect_close((*gm)(x), (*net)(x), 0.0);
}

}  // namespace

// The interface the deploy pass, the numeric debugger and the quant meta use instead of
// switching on the type: each Q module names the float type it replaced, deploys to its D
// module (whose float_weight() is quantized_weight()), and reports its float weight.
TEST(QModulesTest, TheQuantModuleInterfaceMatchesEachType) {
  nn::Conv2d conv({.in = 2, .out = 3, .kernel = 3, .padding = 1});
  nn::BatchNorm2d bn({.features = 3});
  nn::Linear linear({.in = 4, .out = 2});
  const std::vector<std::pair<nn::ModulePtr, Tensor>> cases{
      {QConv2d::from_float(conv, {}), seq({1, 2, 5, 5}, 0.3, 2.0)},
      {QConvBN::from_float(conv, bn, {}), seq({1, 2, 5, 5}, 0.3, 2.0)},
      {QLinear::from_float(linear, {}), seq({3, 4}, 0.2, 1.0)}};
  const std::vector<std::tuple<std::string, std::string, bool>> want{
      {"Conv2d", "DConv2d", false}, {"Conv2d", "DConv2d", true}, {"Linear", "DLinear", false}};
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& [module, x] = cases[i];
    SCOPED_TRACE(module->type_name());
    (*module)(x);  // the observers record once, so the module can deploy
    const auto& q = dynamic_cast<const QuantModule&>(*module);
    EXPECT_EQ(q.float_type(), std::get<0>(want[i]));
    EXPECT_EQ(q.folds_batchnorm(), std::get<2>(want[i]));
    EXPECT_FALSE(q.applies_relu());
    const nn::ModulePtr d = q.deploy();
    EXPECT_EQ(d->type_name(), std::get<1>(want[i]));
    quant_test::expect_close(q.quantized_weight(), dynamic_cast<const DeployedModule&>(*d).float_weight(), 0.0);
  }
  const auto& qconv = dynamic_cast<const QConv2d&>(*cases[0].first);
  EXPECT_TRUE(qconv.float_weight().is_same(qconv.weight));
  const auto& qconvbn = dynamic_cast<const QConvBN&>(*cases[1].first);
  quant_test::expect_close(qconvbn.float_weight(), qconvbn.fold_running_stats().first, 0.0);
  EXPECT_TRUE(dynamic_cast<const QuantModule&>(*qconvbn.fused_with_relu()).applies_relu());
}
