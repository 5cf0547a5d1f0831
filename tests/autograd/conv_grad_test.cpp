// Gradients of conv2d and the pooling ops: gradcheck (float64) on every differentiable input
// over several geometries, and PyTorch 1.13 gradients for a mid-size convolution
// (tests/core/goldens/conv_pool.py).
#include <gtest/gtest.h>

#include <cmath>

#include "qflow/qflow.h"
#include "test_helpers.h"

using namespace qflow;

namespace {

// The goldens' float32 inputs (test_helpers.h) in float64, requiring grad.
Tensor seq(const IntList& shape, double seed, double scale = 1.0) {
  return testing_util::sin_seq_f32(shape, seed, scale, DType::Float64).requires_grad_();
}

struct ConvConfig {
  IntList x, w;
  bool bias;
  IntList stride, padding, dilation;
  int64_t groups;
};

void gradcheck_conv(const ConvConfig& c) {
  TensorList inputs{seq(c.x, 0.1), seq(c.w, 0.7, 0.5)};
  if (c.bias) inputs.push_back(seq({c.w[0]}, 1.3, 0.5));
  EXPECT_TRUE(gradcheck(
      [&](const TensorList& in) {
        std::optional<Tensor> b;
        if (in.size() == 3) b = in[2];
        return conv2d(in[0], in[1], b, c.stride, c.padding, c.dilation, c.groups);
      },
      inputs));
}

double sum_of(const Tensor& t) {
  double s = 0;
  for (double v : to_vector<double>(t)) s += v;
  return s;
}

}  // namespace

TEST(Conv2dGradTest, GradcheckOnInputWeightAndBias) {
  gradcheck_conv({{2, 2, 5, 5}, {3, 2, 3, 3}, true, {1}, {0}, {1}, 1});
}

TEST(Conv2dGradTest, GradcheckWithStrideAndPadding) {
  gradcheck_conv({{1, 2, 6, 5}, {2, 2, 3, 3}, true, {2}, {1}, {1}, 1});
}

TEST(Conv2dGradTest, GradcheckWithDilationAndRectangularKernel) {
  gradcheck_conv({{1, 2, 7, 6}, {2, 2, 3, 2}, false, {1, 2}, {2, 1}, {2, 1}, 1});
}

TEST(Conv2dGradTest, GradcheckWithGroups) {
  gradcheck_conv({{2, 4, 4, 4}, {4, 2, 3, 3}, true, {1}, {1}, {1}, 2});
}

TEST(Conv2dGradTest, GradcheckDepthwise) {
  gradcheck_conv({{1, 3, 5, 5}, {6, 1, 3, 3}, true, {2}, {1}, {1}, 3});
}

TEST(Conv2dGradTest, GradcheckPointwiseDirectAndBatchedPaths) {
  gradcheck_conv({{1, 3, 3, 3}, {2, 3, 1, 1}, true, {1}, {0}, {1}, 1});  // direct GEMM on the input
  gradcheck_conv({{2, 3, 3, 3}, {2, 3, 1, 1}, false, {1}, {0}, {1}, 1}); // images batched into one GEMM
  gradcheck_conv({{2, 3, 5, 5}, {2, 3, 1, 1}, false, {2}, {0}, {1}, 1}); // strided downsample
}

TEST(Conv2dGradTest, GradientsOnlyForInputsThatRequireThem) {
  Tensor x = seq({1, 2, 5, 5}, 0.1).detach();
  Tensor w = seq({3, 2, 3, 3}, 0.7);
  Tensor b = seq({3}, 1.3).detach();
  Tensor y = conv2d(x, w, b);
  EXPECT_EQ(y.grad_fn_name(), "ConvolutionBackward");
  y.backward(ones(y.sizes(), DType::Float64));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().sizes(), (IntList{3, 2, 3, 3}));
  // d sum(y) / d w[o, c, i, j] = sum of the input pixels the tap (i, j) sees: the 3x3 block at (i, j).
  const auto xv = to_vector<double>(x);
  double tap00 = 0;
  for (int r = 0; r < 3; ++r)
    for (int q = 0; q < 3; ++q) tap00 += xv[r * 5 + q];
  EXPECT_NEAR(to_vector<double>(w.grad())[0], tap00, 1e-12);
}

TEST(Conv2dGradTest, MidSizeGradientsMatchPyTorch) {
  // x (4, 8, 12, 12), w (16, 4, 3, 3), bias, stride 2, padding 1, groups 2; gy = seq(y shape, 1.7).
  Tensor x = seq({4, 8, 12, 12}, 0.2), w = seq({16, 4, 3, 3}, 0.5, 0.3), b = seq({16}, 0.9, 0.3);
  Tensor y = conv2d(x, w, b, {2}, {1}, {1}, 2);
  ASSERT_EQ(y.sizes(), (IntList{4, 16, 6, 6}));
  EXPECT_NEAR(sum_of(y), -20.8247157631, 1e-8);
  y.backward(seq({4, 16, 6, 6}, 1.7).detach());
  EXPECT_NEAR(sum_of(x.grad()), 53.2964721017, 1e-8);
  EXPECT_NEAR(sum_of(w.grad()), -3.98914776984, 1e-8);
  const auto gb = to_vector<double>(b.grad());
  EXPECT_NEAR(gb[0], 6.11681109, 1e-7);
  EXPECT_NEAR(gb[15], -0.894226835, 1e-7);
  EXPECT_NEAR(to_vector<double>(w.grad())[4], 36.6912416, 1e-6);  // gw[0, 0, 1, 1]
}

// ---- pooling ------------------------------------------------------------------------------------------

TEST(Pool2dGradTest, GradcheckMaxPool) {
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return max_pool2d(in[0], {3}, {2}, {1}); }, {seq({1, 2, 6, 7}, 0.2)}));
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return max_pool2d(in[0], {2}, {1}, {0}, {2}, true); },
                        {seq({2, 1, 5, 6}, 0.4)}));
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return max_pool2d(in[0], {3}, {2}, {0}, {1}, true); },
                        {seq({1, 1, 6, 6}, 0.4)}));
}

TEST(Pool2dGradTest, GradcheckMaxPoolWithIndices) {
  Tensor x = seq({1, 2, 5, 5}, 0.3);
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return std::get<0>(max_pool2d_with_indices(in[0], {2}, {1}, {1})); },
                        {x}));
  auto [y, idx] = max_pool2d_with_indices(x, {2});
  EXPECT_EQ(y.grad_fn_name(), "MaxPool2DWithIndicesBackward");
  EXPECT_FALSE(idx.requires_grad());
}

TEST(Pool2dGradTest, GradcheckAvgPool) {
  Tensor x = seq({1, 2, 6, 7}, 0.2);
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return avg_pool2d(in[0], {3}, {2}, {1}); }, {x}));
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return avg_pool2d(in[0], {3}, {2}, {1}, true, false); }, {x}));
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return avg_pool2d(in[0], {2, 3}, {1, 2}, {1, 0}, false, true, 4); }, {x}));
}

TEST(Pool2dGradTest, GradcheckAdaptiveAvgPool) {
  Tensor x = seq({2, 1, 5, 7}, 0.6);
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return adaptive_avg_pool2d(in[0], {3, 4}); }, {x}));
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return adaptive_avg_pool2d(in[0], {1}); }, {x}));
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return adaptive_avg_pool2d(in[0], {7, 9}); }, {x}));
}

TEST(Pool2dGradTest, NodeNamesFollowPyTorch) {
  Tensor x = seq({1, 1, 4, 4}, 0.1);
  EXPECT_EQ(max_pool2d(x, {2}).grad_fn_name(), "MaxPool2DBackward");
  EXPECT_EQ(avg_pool2d(x, {2}).grad_fn_name(), "AvgPool2DBackward");
  EXPECT_EQ(adaptive_avg_pool2d(x, {1}).grad_fn_name(), "AdaptiveAvgPool2DBackward");
}
