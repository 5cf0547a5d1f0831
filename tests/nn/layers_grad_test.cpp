// Gradients of every layer w.r.t. its input and its parameters (finite differences in
// float64), and the train/eval behaviour of BatchNorm and Dropout.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "nn/golden_util.h"
#include "nn/test_modules.h"
#include "qflow/autograd/gradcheck.h"

using namespace qflow;
using nn_golden::fill_params;
using nn_golden::seq;

namespace {

// gradcheck of y = m(x) w.r.t. x and every parameter of m, in float64. The parameters are
// passed as gradcheck inputs: gradcheck perturbs its inputs' own storage, and these inputs are
// the module's parameter tensors themselves, so `fn` sees the perturbation through m.
// `before_call` runs before every forward (e.g. to reseed Dropout so each call draws the same mask).
void expect_gradients_match(nn::Module& m, const Tensor& x_in, const std::function<void()>& before_call = {}) {
  m.to(DType::Float64);
  fill_params(m);
  Tensor x = x_in.to(DType::Float64).requires_grad_();
  const std::vector<Tensor> params = m.parameters();
  TensorList inputs{x};
  inputs.insert(inputs.end(), params.begin(), params.end());
  for (const Tensor& p : params) ASSERT_TRUE(p.requires_grad() && p.dtype() == DType::Float64);
  auto fn = [&](const TensorList& in) {
    for (size_t k = 1; k < in.size(); ++k) QFLOW_ASSERT(in[k].is_same(params[k - 1]), "parameter {} was replaced", k);
    if (before_call) before_call();
    return m(in[0]);
  };
  try {
    EXPECT_TRUE(gradcheck(fn, inputs));
  } catch (const Error& e) {
    ADD_FAILURE() << m.repr() << ": " << e.message();
  }
}

TEST(LayerGradTest, Conv2dInputWeightAndBias) {
  const nn::Conv2dOptions cases[] = {
      {.in = 2, .out = 3, .kernel = 3, .stride = 2, .padding = 1},
      {.in = 2, .out = 2, .kernel = 3, .padding = 2, .dilation = 2},
      {.in = 4, .out = 2, .kernel = {3, 2}, .padding = {1, 0}, .groups = 2},
      {.in = 3, .out = 3, .kernel = 3, .padding = 1, .groups = 3, .bias = false},
      {.in = 3, .out = 2, .kernel = 1},
      {.in = 2, .out = 2, .kernel = {2, 3}, .padding = "same"},
  };
  for (const auto& o : cases) {
    nn::Conv2d conv(o);
    SCOPED_TRACE(conv.repr());
    expect_gradients_match(conv, seq({2, o.in, 5, 4}, 0.5));
  }
}

TEST(LayerGradTest, LinearTwoAndThreeDim) {
  nn::Linear a({.in = 4, .out = 3});
  expect_gradients_match(a, seq({3, 4}, 0.5));
  nn::Linear b({.in = 4, .out = 2, .bias = false});
  expect_gradients_match(b, seq({2, 3, 4}, 0.5));
}

TEST(LayerGradTest, BatchNormTrainAndEval) {
  nn::BatchNorm2d bn({.features = 3});
  expect_gradients_match(bn, seq({2, 3, 3, 2}, 0.5, 2.0));
  nn::BatchNorm2d no_affine({.features = 2, .affine = false});
  expect_gradients_match(no_affine, seq({3, 2, 2, 2}, 0.5, 2.0));
  nn::BatchNorm1d bn1({.features = 3});
  expect_gradients_match(bn1, seq({4, 3}, 0.5, 2.0));
  nn::BatchNorm1d bn1_3d({.features = 2, .momentum = std::nullopt});
  expect_gradients_match(bn1_3d, seq({2, 2, 3}, 0.5, 2.0));
  // Eval: the running statistics are constants.
  nn::BatchNorm2d eval_bn({.features = 3});
  eval_bn(seq({4, 3, 3, 3}, 1.5, 3.0));
  eval_bn.eval();
  expect_gradients_match(eval_bn, seq({2, 3, 3, 2}, 0.5, 2.0));
}

TEST(LayerGradTest, Pooling) {
  const Tensor x = seq({2, 2, 5, 6}, 0.5);
  nn::MaxPool2d max_pool({.kernel = 3, .stride = 2, .padding = 1, .ceil_mode = true});
  expect_gradients_match(max_pool, x);
  nn::MaxPool2d dilated({.kernel = 2, .stride = 1, .dilation = 2});
  expect_gradients_match(dilated, x);
  nn::AvgPool2d avg({.kernel = 3, .stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false});
  expect_gradients_match(avg, x);
  nn::AvgPool2d avg_pad({.kernel = 2, .padding = 1});
  expect_gradients_match(avg_pad, x);
  nn::AdaptiveAvgPool2d adaptive({.output = {3, 4}});
  expect_gradients_match(adaptive, x);
}

TEST(LayerGradTest, ActivationsFlattenIdentity) {
  const Tensor x = seq({3, 4, 5}, 0.5, 4.0);  // crosses 0 and ±3, away from the kinks
  nn::ReLU relu;
  expect_gradients_match(relu, x);
  nn::ReLU6 relu6;
  expect_gradients_match(relu6, x * 2.0);
  nn::Hardswish hardswish;
  expect_gradients_match(hardswish, x);
  nn::Hardsigmoid hardsigmoid;
  expect_gradients_match(hardsigmoid, x);
  nn::Sigmoid sigmoid;
  expect_gradients_match(sigmoid, x);
  nn::SiLU silu;
  expect_gradients_match(silu, x);
  nn::Tanh tanh_layer;
  expect_gradients_match(tanh_layer, x);
  nn::Flatten flatten;
  expect_gradients_match(flatten, x);
  nn::Identity identity;
  expect_gradients_match(identity, x);
}

TEST(LayerGradTest, DropoutWithFixedMask) {
  nn::Dropout drop({.p = 0.4});
  expect_gradients_match(drop, seq({4, 5}, 0.5), [] { manual_seed(11); });
}

TEST(LayerGradTest, SequentialConvNetInTraining) {
  nn::Sequential net(nn::Conv2d({.in = 2, .out = 3, .kernel = 3, .padding = 1}), nn::BatchNorm2d({.features = 3}),
                     nn::ReLU(), nn::MaxPool2d({.kernel = 2}), nn::Flatten(), nn::Linear({.in = 12, .out = 2}));
  expect_gradients_match(net, seq({2, 2, 4, 4}, 0.5));
}

// ---- train / eval behaviour -----------------------------------------------------------------

TEST(BatchNormModeTest, TrainingNormalizesWithBatchStatsAndUpdatesBuffers) {
  nn::BatchNorm2d bn({.features = 2});
  const Tensor x = seq({4, 2, 3, 3}, 0.5, 3.0) + 1.0;
  const Tensor y = bn(x);
  // weight 1, bias 0: every channel comes out with mean 0 and biased variance ≈ 1.
  const auto mean = to_vector<float>(y.mean({0, 2, 3}));
  const auto var = to_vector<float>(y.var({0, 2, 3}, /*unbiased=*/false));
  for (int c = 0; c < 2; ++c) {
    EXPECT_NEAR(mean[c], 0.0f, 1e-6f);
    EXPECT_NEAR(var[c], 1.0f, 1e-4f);  // eps = 1e-5 shrinks it a little
  }
  // running = 0.9·initial + 0.1·batch, with the unbiased variance.
  const auto batch_mean = to_vector<float>(x.mean({0, 2, 3}));
  const auto batch_var = to_vector<float>(x.var({0, 2, 3}, /*unbiased=*/true));
  const auto rm = to_vector<float>(bn.running_mean);
  const auto rv = to_vector<float>(bn.running_var);
  for (int c = 0; c < 2; ++c) {
    EXPECT_NEAR(rm[c], 0.1f * batch_mean[c], 1e-6f);
    EXPECT_NEAR(rv[c], 0.9f + 0.1f * batch_var[c], 1e-6f);
  }
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
}

TEST(BatchNormModeTest, EvalUsesRunningStatsAndLeavesBuffersAlone) {
  nn::BatchNorm2d bn({.features = 2});
  fill_params(bn);
  bn(seq({4, 2, 3, 3}, 0.5, 3.0) + 1.0);
  bn.eval();
  EXPECT_FALSE(bn.is_training());
  const auto rm = to_vector<float>(bn.running_mean), rv = to_vector<float>(bn.running_var);
  const auto w = to_vector<float>(bn.weight), b = to_vector<float>(bn.bias);
  const Tensor x = seq({2, 2, 2, 2}, 1.5, 2.0);
  const auto xs = to_vector<float>(x);
  const auto y = to_vector<float>(bn(x));
  for (size_t i = 0; i < xs.size(); ++i) {
    const size_t c = (i / 4) % 2;
    const double want = (xs[i] - rm[c]) / std::sqrt(rv[c] + 1e-5) * w[c] + b[c];
    EXPECT_NEAR(y[i], want, 1e-5) << i;
  }
  EXPECT_EQ(to_vector<float>(bn.running_mean), rm);
  EXPECT_EQ(to_vector<float>(bn.running_var), rv);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  // Eval output of one sample does not depend on the rest of the batch.
  const auto y0 = to_vector<float>(bn(x.narrow(0, 0, 1)));
  for (size_t i = 0; i < y0.size(); ++i) EXPECT_EQ(y0[i], y[i]);
  // Back to training: the buffers move again.
  bn.train();
  bn(x);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 2);
  EXPECT_NE(to_vector<float>(bn.running_mean), rm);
}

TEST(BatchNormModeTest, RunningStatsGetNoGradientAndStayOutOfTheGraph) {
  nn::BatchNorm2d bn({.features = 2});
  const Tensor x = seq({3, 2, 2, 2}, 0.5).requires_grad_();
  bn(x).sum().backward();
  EXPECT_FALSE(bn.running_mean.requires_grad());
  EXPECT_FALSE(bn.running_var.requires_grad());
  EXPECT_TRUE(bn.weight.grad().defined());
  EXPECT_TRUE(x.grad().defined());
}

TEST(DropoutModeTest, ParentEvalDisablesDropoutAndTrainReenablesIt) {
  nn::Sequential net(nn::Linear({.in = 8, .out = 8}), nn::Dropout({.p = 0.5}));
  const Tensor x = seq({16, 8}, 0.5);
  net.eval();
  const auto a = to_vector<float>(net(x));
  const auto b = to_vector<float>(net(x));
  EXPECT_EQ(a, b);  // deterministic: no mask in eval
  EXPECT_EQ(std::count(a.begin(), a.end(), 0.0f), 0);
  net.train();
  const auto c = to_vector<float>(net(x));
  const auto zeros_seen = std::count(c.begin(), c.end(), 0.0f);
  EXPECT_GT(zeros_seen, 30);  // 128 draws of p = 0.5
  EXPECT_LT(zeros_seen, 98);
}

TEST(DropoutModeTest, GradientIsTheScaledMask) {
  nn::Dropout drop({.p = 0.25});
  const Tensor x = (seq({40, 25}, 0.5) + 2.0).requires_grad_();
  const Tensor y = drop(x);
  y.sum().backward();
  const auto out = to_vector<float>(y);
  const auto g = to_vector<float>(x.grad());
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(g[i], out[i] == 0.0f ? 0.0f : 1.0f / 0.75f) << i;
}

}  // namespace
