// DConv2d / DLinear: built from trained Q modules, their eval outputs equal the Q modules'
// eval outputs; weights lie on their grids; state_dict round trip of a QAT model.
#include <filesystem>

#include "nn/golden_util.h"
#include "quant/quant_test_util.h"

using namespace qflow;
using namespace qflow::quant;
using ::testing::HasSubstr;
using nn_golden::seq;
using quant_test::error_of;
using quant_test::values;

namespace {

const QConfig kConfigs[] = {
    {},
    {.per_layer = false},
    {.scheme = Scheme::Affine},
    {.bits = 4, .scheme = Scheme::Affine, .per_layer = false, .momentum = 0.9},
    {.formula = Formula::Cambricon},
};

// Each weight divided by its channel's scale, plus the zero point, is an integer of the grid.
void expect_on_grid(const Tensor& weight, const Tensor& scale, const Tensor& zero_point, const QConfig& qc) {
  const std::vector<float> w = values(weight), s = values(scale), z = values(zero_point);
  const int64_t per = weight.numel() / static_cast<int64_t>(s.size());
  for (size_t i = 0; i < w.size(); ++i) {
    const size_t c = s.size() == 1 ? 0 : i / static_cast<size_t>(per);
    ASSERT_GT(s[c], 0.0f);
    const double q = static_cast<double>(w[i]) / s[c] + z[c];
    EXPECT_NEAR(q, std::nearbyint(q), 1e-3) << "element " << i;
    EXPECT_GE(std::nearbyint(q), static_cast<double>(qc.quant_min()));
    EXPECT_LE(std::nearbyint(q), static_cast<double>(qc.quant_max()));
  }
}

TEST(DConv2dTest, FromQConvBNEqualsItsEvalOutput) {
  for (const QConfig& qc : kConfigs) {
    SCOPED_TRACE(qc.to_string());
    QConvBN q({.in = 3, .out = 4, .kernel = 3, .padding = 1, .bias = false}, {}, qc);
    for (int step = 0; step < 3; ++step) q(seq({2, 3, 5, 5}, step, 1.0 + step));
    q.eval();
    auto d = DConv2d::from_qconvbn(q);
    EXPECT_FALSE(d->is_training());
    const Tensor x = seq({3, 3, 5, 5}, 7.0, 2.5);
    quant_test::expect_close((*d)(x), q(x), 1e-5, 1e-7);
    EXPECT_TRUE(d->bias.defined());
    expect_on_grid(d->float_weight(), d->weight_scale, d->weight_zero_point, qc);
    EXPECT_THAT(values(d->input_scale), ::testing::ElementsAreArray(values(q.input_observer->calculate_qparams().scale)));
    // Deployed means fixed: training mode changes nothing.
    d->train();
    quant_test::expect_close((*d)(x), q(x), 1e-5, 1e-7);
  }
}

TEST(DConv2dTest, FromQConv2dAndDLinearFromQLinear) {
  for (const QConfig& qc : kConfigs) {
    SCOPED_TRACE(qc.to_string());
    QConv2d qc2({.in = 2, .out = 3, .kernel = 3, .stride = 2}, qc);
    QLinear ql({.in = 5, .out = 2}, qc);
    for (int step = 0; step < 2; ++step) {
      qc2(seq({2, 2, 6, 6}, step, 1.5));
      ql(seq({3, 5}, step + 0.5));
    }
    qc2.eval();
    ql.eval();
    auto dc = DConv2d::from_qconv2d(qc2);
    auto dl = DLinear::from_qlinear(ql);
    quant_test::expect_close((*dc)(seq({1, 2, 6, 6}, 3.0)), qc2(seq({1, 2, 6, 6}, 3.0)), 1e-5, 1e-7);
    quant_test::expect_close((*dl)(seq({4, 5}, 3.0, 2.0)), ql(seq({4, 5}, 3.0, 2.0)), 1e-5, 1e-7);
    expect_on_grid(dc->float_weight(), dc->weight_scale, dc->weight_zero_point, qc);
    expect_on_grid(dl->float_weight(), dl->weight_scale, dl->weight_zero_point, qc);
    EXPECT_EQ(dl->weight_scale.numel(), qc.per_layer ? 1 : 2);
  }
}

TEST(DConv2dTest, DisabledFakeQuantDeploysTheFloatModule) {
  QConv2d q({.in = 1, .out = 2, .kernel = 1});
  q.enable_fake_quant(false);
  auto d = DConv2d::from_qconv2d(q);
  EXPECT_THAT(values(d->input_scale), ::testing::ElementsAre(0.0f));
  const Tensor x = seq({1, 1, 3, 3}, 0.2, 4.0);
  quant_test::expect_close((*d)(x), q(x), 0.0);
}

TEST(DConv2dTest, RefusesModulesThatNeverObserved) {
  QConvBN q({.in = 1, .out = 2, .kernel = 1});
  EXPECT_THAT(error_of([&] { DConv2d::from_qconvbn(q); }),
              HasSubstr("DConv2d::from_qconvbn: the source module's observers have not recorded anything"));
  QLinear l({.in = 2, .out = 2});
  EXPECT_THAT(error_of([&] { DLinear::from_qlinear(l); }), HasSubstr("DLinear::from_qlinear: the source module's"));
}

TEST(DConv2dTest, StateDictLayoutAndRepr) {
  DConv2d d({.in = 2, .out = 3, .kernel = 3}, {.per_layer = false});
  EXPECT_EQ(d.state_dict().keys(), (std::vector<std::string>{"weight", "bias", "input_scale", "input_zero_point",
                                                              "weight_scale", "weight_zero_point"}));
  EXPECT_EQ(d.weight_scale.numel(), 3);
  // An empty layer has no input grid yet: the printed model says it cannot run integers and why.
  EXPECT_EQ(d.extra_repr(),
            "2, 3, kernel_size=(3, 3), stride=(1, 1), bits=8, scheme=symmetric, formula=google, per_layer=False, "
            "integer=False (the input scale is 0 (an empty or all-zero range))");
  d.set_integer(false);
  EXPECT_EQ(d.extra_repr(),
            "2, 3, kernel_size=(3, 3), stride=(1, 1), bits=8, scheme=symmetric, formula=google, per_layer=False, "
            "integer=False");
}

// A small QAT model: QConvBN → ReLU → QLinear.
struct QatNet : nn::Cloneable<QatNet> {
  std::shared_ptr<QConvBN> features =
      register_module("features", QConvBN({.in = 2, .out = 3, .kernel = 3, .padding = 1, .bias = false}, {},
                                          {.scheme = Scheme::Affine, .per_layer = false}));
  std::shared_ptr<QLinear> fc =
      register_module("fc", QLinear({.in = 3 * 4 * 4, .out = 2}, {.scheme = Scheme::Affine, .per_layer = false}));
  Tensor forward(const Tensor& x) override {
    const Tensor y = F::relu((*features)(x));
    return (*fc)(y.view({y.size(0), -1}));
  }
};

void train_steps(QatNet& net, int steps, int first) {
  nn::optim::SGD opt(net.parameters(), {.lr = 0.05, .momentum = 0.9});
  for (int s = first; s < first + steps; ++s) {
    opt.zero_grad();
    const Tensor out = net(seq({4, 2, 4, 4}, s, 1.5));
    mse_loss(out, seq(out.sizes(), s + 0.5)).backward();
    opt.step();
  }
}

TEST(QatStateDictTest, SaveLoadRoundTripRestoresOutputsAndStatistics) {
  manual_seed(3);
  auto net = std::make_shared<QatNet>();
  train_steps(*net, 3, 0);
  const std::string path = (std::filesystem::temp_directory_path() / "qflow_quant_state_dict.safetensors").string();
  nn::save(net->state_dict(), path);

  manual_seed(99);  // different initial weights
  auto restored = std::make_shared<QatNet>();
  restored->load_state_dict(nn::load(path));
  std::filesystem::remove(path);
  for (const auto& [k, v] : net->state_dict()) {
    const Tensor r = restored->state_dict().at(k);
    EXPECT_EQ(r.dtype(), v.dtype()) << k;
    EXPECT_THAT(quant_test::values(r.to(DType::Float32)), ::testing::ElementsAreArray(values(v.to(DType::Float32))))
        << k;
  }
  EXPECT_EQ(restored->features->input_observer->num_observations(), 3);
  const Tensor x = seq({2, 2, 4, 4}, 11.0);
  net->eval();
  restored->eval();
  quant_test::expect_close((*restored)(x), (*net)(x), 0.0);
  // Training resumes identically (observer averages continue, BN statistics move the same way).
  net->train();
  restored->train();
  quant_test::expect_close((*restored)(x), (*net)(x), 0.0);
  quant_test::expect_close(restored->features->bn->running_mean, net->features->bn->running_mean, 0.0);
  quant_test::expect_close(restored->fc->input_observer->max_val(), net->fc->input_observer->max_val(), 0.0);
}

}  // namespace
