// Forward passes of the built-in layers against PyTorch 1.13 (goldens from
// tests/golden/nn_layers.py; inputs and parameters from the formulas in golden_util.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nn/golden_util.h"
#include "nn/nn_golden.inc"
#include "nn/test_modules.h"

using namespace qflow;
using nn_golden::expect_close;
using nn_golden::fill_params;
using nn_golden::Golden;
using nn_golden::seq;
using nn::testing::error_of;
using ::testing::HasSubstr;

namespace {

struct ConvCase {
  const char* name;
  IntList input;
  nn::Conv2dOptions options;
  const Golden& want;
};

TEST(Conv2dTest, ForwardMatchesPyTorch) {
  namespace g = nn_golden;
  const ConvCase cases[] = {
      {"stride2_pad1", {2, 3, 7, 7}, {.in = 3, .out = 4, .kernel = 3, .stride = 2, .padding = 1}, g::conv_stride2_pad1},
      {"dilation2", {1, 2, 7, 7}, {.in = 2, .out = 3, .kernel = 3, .padding = 2, .dilation = 2}, g::conv_dilation2},
      {"groups2", {2, 4, 5, 5}, {.in = 4, .out = 6, .kernel = 3, .padding = 1, .groups = 2}, g::conv_groups2},
      {"depthwise", {2, 4, 6, 6}, {.in = 4, .out = 4, .kernel = 3, .padding = 1, .groups = 4, .bias = false},
       g::conv_depthwise},
      {"depthwise_mult2_stride2", {1, 3, 7, 7}, {.in = 3, .out = 6, .kernel = 3, .stride = 2, .padding = 1, .groups = 3},
       g::conv_depthwise_mult2_stride2},
      {"pointwise", {2, 4, 5, 5}, {.in = 4, .out = 5, .kernel = 1}, g::conv_pointwise},
      {"no_bias_rect",
       {1, 3, 6, 7},
       {.in = 3, .out = 2, .kernel = {2, 3}, .stride = {2, 1}, .padding = {1, 0}, .bias = false},
       g::conv_no_bias_rect},
      {"same_odd", {2, 3, 6, 5}, {.in = 3, .out = 4, .kernel = 3, .padding = "same"}, g::conv_same_odd},
      {"same_odd_dilated", {1, 2, 7, 6}, {.in = 2, .out = 3, .kernel = 3, .padding = "same", .dilation = 2},
       g::conv_same_odd_dilated},
      {"same_even", {2, 2, 6, 5}, {.in = 2, .out = 3, .kernel = 4, .padding = "same"}, g::conv_same_even},
      {"same_even_rect", {1, 2, 6, 7}, {.in = 2, .out = 3, .kernel = {2, 3}, .padding = "same", .bias = false},
       g::conv_same_even_rect},
      {"same_even_dilated", {1, 2, 7, 7}, {.in = 2, .out = 2, .kernel = {4, 2}, .padding = "same", .dilation = {1, 3}},
       g::conv_same_even_dilated},
      {"valid", {1, 2, 5, 5}, {.in = 2, .out = 3, .kernel = 3, .padding = "valid"}, g::conv_valid},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(c.name);
    nn::Conv2d conv(c.options);
    EXPECT_EQ(conv.bias.defined(), c.options.bias);
    fill_params(conv);
    expect_close(conv(seq(c.input, 0.5)), c.want);
  }
}

TEST(Conv2dTest, SamePaddingKeepsSpatialSizeAndRejectsStride) {
  nn::Conv2d conv({.in = 2, .out = 2, .kernel = {4, 5}, .padding = "same", .dilation = {3, 1}});
  EXPECT_EQ(conv(seq({1, 2, 9, 8}, 0.5)).sizes(), (IntList{1, 2, 9, 8}));
  nn::Conv2d strided({.in = 2, .out = 2, .kernel = 3, .stride = 2, .padding = "same"});
  EXPECT_THAT(error_of([&] { strided(seq({1, 2, 5, 5}, 0.5)); }), HasSubstr("not supported for strided convolutions"));
  EXPECT_THAT(error_of([] { nn::Conv2d({.in = 2, .out = 2, .padding = "full"}); }),
              HasSubstr("padding must be an integer, a pair, \"same\" or \"valid\", got \"full\""));
}

TEST(Conv2dTest, ShapesAndBadOptionsAreChecked) {
  nn::Conv2d conv({.in = 4, .out = 6, .kernel = {3, 1}, .groups = 2});
  EXPECT_EQ(conv.weight.sizes(), (IntList{6, 2, 3, 1}));
  EXPECT_EQ(conv.bias.sizes(), (IntList{6}));
  EXPECT_THAT(error_of([] { nn::Conv2d({.in = 3, .out = 4, .groups = 2}); }),
              HasSubstr("groups=2 must divide in=3 and out=4"));
  EXPECT_THAT(error_of([] { nn::Conv2d({.in = 0, .out = 4}); }), HasSubstr("in and out channels must be positive"));
}

// ---- BatchNorm -----------------------------------------------------------------------------

// Mirrors bn_two_steps in the script: two training steps, then eval on a third batch.
void bn_two_steps(nn::Module& m, const IntList& shape, const Golden& train_out,
                  const std::vector<std::pair<std::string, Golden>>* buffers, const Golden& eval_out) {
  fill_params(m);
  m.train();
  m(seq(shape, 0.5));
  expect_close(m(seq(shape, 1.5, 2.0) + 0.25), train_out, 1e-5, 1e-5, "train output");
  if (buffers) {
    ASSERT_EQ(m.named_buffers().size(), buffers->size());
    for (const auto& [name, want] : *buffers) expect_close(m.get_buffer(name), want, 1e-5, 1e-6, name);
  }
  m.eval();
  expect_close(m(seq(shape, 2.5, 1.5)), eval_out, 1e-5, 1e-5, "eval output");
}

TEST(BatchNormTest, BatchNorm2dTrainAndEvalMatchPyTorch) {
  namespace g = nn_golden;
  nn::BatchNorm2d bn({.features = 3});
  bn_two_steps(bn, {4, 3, 5, 4}, g::bn2d_train, &g::bn2d_buffers, g::bn2d_eval);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 2);
}

TEST(BatchNormTest, AffineOffHasNoParametersAndMatchesPyTorch) {
  namespace g = nn_golden;
  nn::BatchNorm2d bn({.features = 3, .affine = false});
  EXPECT_TRUE(bn.parameters().empty());
  bn_two_steps(bn, {4, 3, 5, 4}, g::bn2d_no_affine_train, &g::bn2d_no_affine_buffers, g::bn2d_no_affine_eval);
}

TEST(BatchNormTest, MomentumNoneIsCumulativeAverage) {
  namespace g = nn_golden;
  nn::BatchNorm2d bn({.features = 3, .momentum = std::nullopt});
  bn_two_steps(bn, {4, 3, 5, 4}, g::bn2d_momentum_none_train, &g::bn2d_momentum_none_buffers,
               g::bn2d_momentum_none_eval);
  // After two batches the running mean is exactly the mean of the two batch means.
  const Tensor m1 = seq({4, 3, 5, 4}, 0.5).mean({0, 2, 3});
  const Tensor m2 = (seq({4, 3, 5, 4}, 1.5, 2.0) + 0.25).mean({0, 2, 3});
  const auto want = to_vector<float>((m1 + m2) * 0.5);
  const auto got = to_vector<float>(bn.running_mean);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(got[i], want[i], 1e-6);
}

TEST(BatchNormTest, CustomMomentumAndEps) {
  namespace g = nn_golden;
  nn::BatchNorm2d bn({.features = 3, .eps = 1e-3, .momentum = 0.3});
  bn_two_steps(bn, {2, 3, 3, 3}, g::bn2d_momentum_eps_train, &g::bn2d_momentum_eps_buffers, g::bn2d_momentum_eps_eval);
}

TEST(BatchNormTest, UntrackedStatisticsUseTheBatchInEval) {
  namespace g = nn_golden;
  nn::BatchNorm2d bn({.features = 3, .track_running_stats = false});
  EXPECT_TRUE(bn.buffers().empty());
  EXPECT_FALSE(bn.state_dict().contains("running_mean"));
  bn_two_steps(bn, {4, 3, 5, 4}, g::bn2d_untracked_train, nullptr, g::bn2d_untracked_eval);
}

TEST(BatchNormTest, BatchNorm1dOnTwoAndThreeDimInputs) {
  namespace g = nn_golden;
  nn::BatchNorm1d a({.features = 5});
  bn_two_steps(a, {6, 5}, g::bn1d_2d_input_train, &g::bn1d_2d_input_buffers, g::bn1d_2d_input_eval);
  nn::BatchNorm1d b({.features = 3, .momentum = std::nullopt});
  bn_two_steps(b, {4, 3, 5}, g::bn1d_3d_input_train, &g::bn1d_3d_input_buffers, g::bn1d_3d_input_eval);
}

TEST(BatchNormTest, BadInputsAreRefusedWithoutCountingTheBatch) {
  nn::BatchNorm2d bn({.features = 3});
  EXPECT_THAT(error_of([&] { bn(seq({2, 4, 3, 3}, 0.5)); }), HasSubstr("expected 3 channels, got input of shape [2, 4, 3, 3]"));
  EXPECT_THAT(error_of([&] { bn(seq({2, 3, 3}, 0.5)); }), HasSubstr("BatchNorm2d: expected 4-d input, got shape [2, 3, 3]"));
  nn::BatchNorm1d bn1({.features = 3});
  EXPECT_THAT(error_of([&] { bn1(seq({1, 3}, 0.5)); }), HasSubstr("expected more than 1 value per channel when training"));
  EXPECT_EQ(bn1.num_batches_tracked.item<int64_t>(), 0);
  EXPECT_THAT(error_of([&] { bn1(seq({2, 3, 2, 2}, 0.5)); }),
              HasSubstr("BatchNorm1d: expected 2-d input or 3-d input, got shape [2, 3, 2, 2]"));
}

// ---- Linear, pooling, activations, Flatten -------------------------------------------------

TEST(LinearTest, TwoAndThreeDimInputsMatchPyTorch) {
  nn::Linear a({.in = 5, .out = 3});
  fill_params(a);
  expect_close(a(seq({4, 5}, 0.5)), nn_golden::linear_2d);
  nn::Linear b({.in = 5, .out = 3});
  fill_params(b);
  expect_close(b(seq({2, 3, 5}, 0.5)), nn_golden::linear_3d);
  nn::Linear c({.in = 5, .out = 4, .bias = false});
  EXPECT_FALSE(c.bias.defined());
  EXPECT_EQ(c.parameters().size(), 1u);
  fill_params(c);
  expect_close(c(seq({3, 5}, 0.5)), nn_golden::linear_no_bias);
  EXPECT_THAT(error_of([&] { a(seq({4, 6}, 0.5)); }),
              HasSubstr("linear: input of shape [4, 6] does not match weight of shape [3, 5]"));
}

TEST(PoolingTest, MaxPoolMatchesPyTorch) {
  namespace g = nn_golden;
  expect_close(nn::MaxPool2d({.kernel = 3, .stride = 2, .padding = 1})(seq({2, 3, 7, 6}, 0.5)), g::maxpool_k3_s2_p1);
  expect_close(nn::MaxPool2d({.kernel = 2, .ceil_mode = true})(seq({1, 2, 7, 5}, 0.5)), g::maxpool_k2_ceil);
  expect_close(nn::MaxPool2d({.kernel = 3, .stride = 1, .padding = 1, .dilation = 2})(seq({1, 2, 8, 8}, 0.5)),
               g::maxpool_dilated);
  expect_close(nn::MaxPool2d({.kernel = {3, 2}, .stride = nn::Size2(2, 3), .padding = {1, 0}})(seq({1, 2, 7, 8}, 0.5)),
               g::maxpool_rect);
}

TEST(PoolingTest, AvgPoolMatchesPyTorch) {
  namespace g = nn_golden;
  const Tensor x = seq({2, 3, 7, 6}, 0.5);
  expect_close(nn::AvgPool2d({.kernel = 3, .stride = 2, .padding = 1})(x), g::avgpool_k3_s2_p1);
  expect_close(nn::AvgPool2d({.kernel = 3, .stride = 2, .padding = 1, .count_include_pad = false})(x),
               g::avgpool_no_count_pad);
  expect_close(nn::AvgPool2d({.kernel = 2, .ceil_mode = true})(seq({1, 2, 7, 5}, 0.5)), g::avgpool_ceil);
  const Tensor y = seq({1, 2, 6, 7}, 0.5);
  expect_close(nn::AvgPool2d({.kernel = 3, .stride = 2, .padding = 1, .ceil_mode = true})(y), g::avgpool_ceil_pad);
  expect_close(
      nn::AvgPool2d({.kernel = 3, .stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false})(y),
      g::avgpool_ceil_pad_no_count);
}

TEST(PoolingTest, AdaptiveAvgPoolMatchesPyTorch) {
  namespace g = nn_golden;
  expect_close(nn::AdaptiveAvgPool2d({.output = {3, 2}})(seq({2, 3, 7, 5}, 0.5)), g::adaptive_avg_3x2);
  expect_close(nn::AdaptiveAvgPool2d()(seq({2, 3, 5, 4}, 0.5)), g::adaptive_avg_1);
  expect_close(nn::AdaptiveAvgPool2d({.output = {4, 5}})(seq({1, 2, 3, 2}, 0.5)), g::adaptive_avg_upsample);
}

TEST(ActivationTest, MatchPyTorch) {
  namespace g = nn_golden;
  const Tensor x = seq({3, 4, 5}, 0.5, 8.0);
  expect_close(nn::ReLU()(x), g::relu);
  expect_close(nn::ReLU6()(x), g::relu6);
  expect_close(nn::Hardswish()(x), g::hardswish);
  // hardswish(x) = x * hardsigmoid(x), so the golden of one checks the other.
  expect_close(nn::Hardsigmoid()(x) * x, g::hardswish);
  expect_close(nn::Sigmoid()(x), g::sigmoid);
  expect_close(nn::Tanh()(x), g::tanh);
  EXPECT_TRUE(nn::Identity()(x).is_same(x));
}

TEST(FlattenTest, MatchesPyTorch) {
  const Tensor x = seq({2, 3, 4, 5}, 0.5);
  expect_close(nn::Flatten()(x), nn_golden::flatten_default);
  expect_close(nn::Flatten({.start_dim = 1, .end_dim = 2})(x), nn_golden::flatten_1_2);
  EXPECT_EQ(nn::Flatten({.start_dim = 0})(x).sizes(), (IntList{120}));
}

// ---- Dropout -------------------------------------------------------------------------------

TEST(DropoutTest, EvalIsIdentity) {
  nn::Dropout drop({.p = 0.4});
  drop.eval();
  const Tensor x = seq({50, 40}, 0.5);
  EXPECT_EQ(to_vector<float>(drop(x)), to_vector<float>(x));
}

TEST(DropoutTest, TrainZeroesAboutPAndScalesTheRest) {
  manual_seed(123);
  nn::Dropout drop({.p = 0.3});
  const Tensor x = seq({200, 500}, 0.5) + 2.0;  // strictly positive: a zero means "dropped"
  const std::vector<float> in = to_vector<float>(x);
  const std::vector<float> out = to_vector<float>(drop(x));
  size_t zeros_seen = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0.0f) {
      ++zeros_seen;
    } else {
      ASSERT_NEAR(out[i], in[i] / 0.7f, 1e-6f * std::abs(in[i] / 0.7f)) << i;
    }
  }
  // 100000 Bernoulli(0.3) draws: the standard deviation of the fraction is ~0.0015.
  EXPECT_NEAR(static_cast<double>(zeros_seen) / static_cast<double>(out.size()), 0.3, 0.006);
}

TEST(DropoutTest, SameSeedGivesSameMask) {
  nn::Dropout drop({.p = 0.5});
  const Tensor x = seq({64, 64}, 0.5) + 2.0;
  manual_seed(7);
  const auto a = to_vector<float>(drop(x));
  const auto b = to_vector<float>(drop(x));  // the generator moved on: a new mask
  manual_seed(7);
  const auto c = to_vector<float>(drop(x));
  EXPECT_EQ(a, c);
  EXPECT_NE(a, b);
}

TEST(DropoutTest, ExtremeProbabilitiesAndBadOptions) {
  const Tensor x = seq({10, 10}, 0.5) + 2.0;
  EXPECT_EQ(to_vector<float>(nn::Dropout({.p = 0.0})(x)), to_vector<float>(x));
  EXPECT_EQ(to_vector<float>(nn::Dropout({.p = 1.0})(x)), std::vector<float>(100, 0.0f));
  EXPECT_THAT(error_of([] { nn::Dropout({.p = 1.5}); }), HasSubstr("probability has to be between 0 and 1, but got 1.5"));
}

// ---- composition and printing --------------------------------------------------------------

TEST(SequentialTest, ConvNetMatchesPyTorchInTrainAndEval) {
  auto net = nn_golden::small_net();
  fill_params(*net);
  const Tensor x = seq({2, 3, 8, 8}, 0.5);
  expect_close((*net)(x), nn_golden::sequential_train);
  net->eval();
  expect_close((*net)(x), nn_golden::sequential_eval);
}

struct Net : nn::Cloneable<Net> {
  std::shared_ptr<nn::Sequential> features = register_module(
      "features",
      nn::Sequential(nn::Conv2d({.in = 3, .out = 16, .kernel = 3, .padding = 1, .bias = false}),
                     nn::BatchNorm2d({.features = 16}), nn::ReLU6(),
                     nn::Conv2d({.in = 16, .out = 16, .kernel = 3, .stride = 2, .padding = 1, .groups = 16}),
                     nn::Hardswish(),
                     nn::Conv2d({.in = 16, .out = 8, .kernel = {1, 3}, .padding = "same", .dilation = {1, 2}}),
                     nn::Conv2d({.in = 8, .out = 8, .kernel = 1, .padding = "valid"}),
                     nn::MaxPool2d({.kernel = 3, .stride = 2, .padding = 1}),
                     nn::MaxPool2d({.kernel = {2, 2}, .ceil_mode = true}),
                     nn::AvgPool2d({.kernel = 3, .stride = 1, .padding = 1}), nn::AvgPool2d({.kernel = {2, 1}}),
                     nn::AdaptiveAvgPool2d({.output = 1}), nn::Flatten(), nn::Dropout({.p = 0.2})));
  std::shared_ptr<nn::ModuleList> head =
      register_module("head", nn::ModuleList(nn::Linear({.in = 8, .out = 4}), nn::Linear({.in = 4, .out = 2, .bias = false})));
  std::shared_ptr<nn::BatchNorm1d> norm =
      register_module("norm", nn::BatchNorm1d({.features = 4, .eps = 1e-3, .momentum = std::nullopt, .affine = false}));
  std::shared_ptr<nn::Sequential> gates = register_module(
      "gates", nn::Sequential(nn::Sigmoid(), nn::Tanh(), nn::ReLU(), nn::Identity(), nn::Flatten({0, 2})));
  std::shared_ptr<nn::AdaptiveAvgPool2d> pool = register_module("pool", nn::AdaptiveAvgPool2d({.output = {2, 3}}));
};

TEST(SequentialTest, CloneKeepsOptionsValuesAndIsIndependent) {
  auto net = nn_golden::small_net();
  fill_params(*net);
  net->eval();
  auto copy = std::dynamic_pointer_cast<nn::Sequential>(net->clone());
  ASSERT_NE(copy, nullptr);
  EXPECT_FALSE(copy->is_training());
  EXPECT_EQ(copy->repr(), net->repr());
  const Tensor x = seq({2, 3, 8, 8}, 0.5);
  const std::vector<float> before = to_vector<float>((*net)(x));
  EXPECT_EQ(to_vector<float>((*copy)(x)), before);
  // Training the copy (parameters and BN buffers) leaves the original alone.
  copy->train();
  (*copy)(x).sum().backward();
  {
    NoGradGuard no_grad;
    for (const Tensor& p : copy->parameters()) Tensor(p).sub_(p.grad(), 0.1);
  }
  EXPECT_EQ(to_vector<float>((*net)(x)), before);
  EXPECT_EQ(net->get_buffer("1.num_batches_tracked").item<int64_t>(), 0);
  EXPECT_FALSE(net->get_parameter("0.weight").grad().defined());
}

TEST(ReprTest, MatchesPyTorchTextExactly) {
  Net net;
  EXPECT_EQ(net.repr(), std::string(nn_golden::kNetRepr));
  EXPECT_EQ(net.clone()->repr(), std::string(nn_golden::kNetRepr));
}

}  // namespace
