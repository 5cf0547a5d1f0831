// Tensors in oneDNN's blocked layout (Note [Opaque layouts]): which ops keep it, that every
// other op and every direct read sees the right values, and that blocked kernels (ReLU, add,
// the ReLU gradient, batch norm, convolution) equal their plain twins, padding lanes included.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "qflow/qflow.h"
#include "relative_error.h"

using namespace qflow;

namespace {

std::string layout_of(const Tensor& t) {
  const OpaqueLayout* l = t.impl()->opaque_layout();
  return l ? l->name() : "plain";
}

using qflow::testing_util::relative_error;

// A blocked activation: the output of a oneDNN convolution (20 channels: 16 + 4 and 12 lanes
// of padding in the second block), and the plain tensor with the same values.
struct Blocked {
  Tensor blocked, plain;
};

Blocked blocked_activation(uint64_t seed, int64_t channels = 20) {
  manual_seed(seed);
  const Tensor x = randn({2, 8, 6, 6}), w = randn({channels, 8, 3, 3});
  ConvSettingsGuard direct(ConvEngine::OneDNN, ConvAlgorithm::Direct);
  set_conv_keeps_blocked_layout(true);
  Blocked b;
  b.blocked = conv2d(x, w, std::nullopt, {1}, {1});
  set_conv_keeps_blocked_layout(false);
  b.plain = conv2d(x, w, std::nullopt, {1}, {1});
  set_conv_keeps_blocked_layout(true);
  return b;
}

class OpaqueLayoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Blocked probe = blocked_activation(1);
    if (layout_of(probe.blocked) == "plain") GTEST_SKIP() << "oneDNN chose a plain layout on this CPU";
  }
};

TEST_F(OpaqueLayoutTest, ConvolutionOutputsStayBlockedAndReadBackPlain) {
  const Blocked b = blocked_activation(2);
  EXPECT_THAT(layout_of(b.blocked), ::testing::AnyOf("nChw16c", "nChw8c"));
  EXPECT_FALSE(b.blocked.is_contiguous());
  EXPECT_EQ(b.blocked.sizes(), (std::vector<int64_t>{2, 20, 6, 6}));
  EXPECT_EQ(layout_of(b.plain), "plain");
  const int64_t before = layout_conversion_count();
  EXPECT_EQ(to_vector<float>(b.blocked), to_vector<float>(b.plain));  // reading converts in place
  EXPECT_EQ(layout_conversion_count(), before + 1);
  EXPECT_EQ(layout_of(b.blocked), "plain");
  EXPECT_TRUE(b.blocked.is_contiguous());
}

TEST_F(OpaqueLayoutTest, OpsThatCannotTakeTheLayoutSeeThePlainValues) {
  const Blocked b = blocked_activation(3);
  const Tensor v = b.blocked.view({2, -1});  // a view: must alias the converted tensor
  EXPECT_EQ(layout_of(b.blocked), "plain");
  EXPECT_EQ(to_vector<float>(v), to_vector<float>(b.plain.view({2, -1})));
  Tensor m = blocked_activation(3).blocked;
  m.mul_(2.0);  // an in-place op that is not layout-aware converts, then writes
  EXPECT_EQ(to_vector<float>(m), to_vector<float>(b.plain * 2.0));
  EXPECT_EQ(to_vector<float>(sigmoid(blocked_activation(3).blocked)), to_vector<float>(sigmoid(b.plain)));
}

TEST_F(OpaqueLayoutTest, ReluAndAddKeepTheLayoutAndEqualThePlainOps) {
  const Blocked a = blocked_activation(4), b = blocked_activation(5);
  const Tensor r = relu(a.blocked);
  EXPECT_EQ(layout_of(r), layout_of(a.blocked));
  EXPECT_EQ(to_vector<float>(r), to_vector<float>(relu(a.plain)));

  const Tensor s = add(a.blocked, b.blocked, 0.5);
  EXPECT_EQ(layout_of(s), layout_of(a.blocked));
  EXPECT_EQ(to_vector<float>(s), to_vector<float>(add(a.plain, b.plain, 0.5)));

  const Tensor mixed = add(blocked_activation(4).blocked, b.plain);  // the plain operand joins the layout
  EXPECT_NE(layout_of(mixed), "plain");
  EXPECT_EQ(to_vector<float>(mixed), to_vector<float>(a.plain + b.plain));

  Tensor inplace = blocked_activation(4).blocked;
  relu_(inplace);
  EXPECT_NE(layout_of(inplace), "plain");
  EXPECT_EQ(to_vector<float>(inplace), to_vector<float>(relu(a.plain)));
}

TEST_F(OpaqueLayoutTest, ReluGradientJoinsAPlainGradientToTheBlockedOutput) {
  const Blocked y = blocked_activation(6);
  manual_seed(7);
  const Tensor g = randn(y.plain.sizes());
  const Tensor gx = threshold_backward(g, y.blocked, 0.0);
  EXPECT_NE(layout_of(gx), "plain");
  const Tensor want = where(gt(y.plain, Scalar(0)), g, scalar_tensor(0, g.dtype()));
  EXPECT_EQ(to_vector<float>(gx), to_vector<float>(want));
}

TEST_F(OpaqueLayoutTest, BatchNormOnBlockedEqualsPlainInBothDirections) {
  const Blocked x = blocked_activation(8);
  manual_seed(9);
  const Tensor w = randn({20}), b = randn({20}), gy = randn({2, 20, 6, 6});
  for (bool training : {true, false}) {
    const Tensor rm_a = randn({20}) * 0.1, rv_a = rand({20}) + 0.5;
    const Tensor rm_b = rm_a.clone(), rv_b = rv_a.clone();
    auto [ya, ma, ia] = native_batch_norm(x.blocked, w, b, rm_a, rv_a, training, 0.1, 1e-5);
    auto [yb, mb, ib] = native_batch_norm(x.plain, w, b, rm_b, rv_b, training, 0.1, 1e-5);
    EXPECT_NE(layout_of(ya), "plain");
    // Blocked sums run over 16 channel lanes at a time instead of one channel's run: float32
    // reassociation of 72 terms per channel.
    EXPECT_LT(relative_error(ya, yb), 1e-6) << "training " << training;
    EXPECT_LT(relative_error(rm_a, rm_b), 1e-6);
    EXPECT_LT(relative_error(rv_a, rv_b), 1e-6);
    auto [gxa, gwa, gba] = native_batch_norm_backward(gy, x.blocked, w, rm_a, rv_a, Tensor(), Tensor(), training, 1e-5);
    auto [gxb, gwb, gbb] = native_batch_norm_backward(gy, x.plain, w, rm_b, rv_b, Tensor(), Tensor(), training, 1e-5);
    EXPECT_NE(layout_of(gxa), "plain");
    EXPECT_LT(relative_error(gxa, gxb), 2e-6) << "training " << training;
    EXPECT_LT(relative_error(gwa, gwb), 2e-6);
    EXPECT_LT(relative_error(gba, gbb), 2e-6);
  }
}

TEST_F(OpaqueLayoutTest, GradientsThroughABlockedBlockEqualThePlainOnes) {
  // conv -> batch norm -> relu -> conv, plus a residual add: the layers of a ResNet block.
  auto run = [](bool keep) {
    set_conv_keeps_blocked_layout(keep);
    manual_seed(11);
    Tensor x = randn({2, 16, 8, 8}).requires_grad_();
    Tensor w1 = (randn({16, 16, 3, 3}) * 0.1).requires_grad_(), w2 = (randn({16, 16, 3, 3}) * 0.1).requires_grad_();
    Tensor gamma = ones({16}).requires_grad_(), beta = zeros({16}).requires_grad_();
    Tensor h = relu(batch_norm(conv2d(x, w1, std::nullopt, {1}, {1}), gamma, beta, Tensor(), Tensor(), true));
    Tensor y = relu(add(conv2d(h, w2, std::nullopt, {1}, {1}), x));
    (y * y).mean().backward();
    set_conv_keeps_blocked_layout(true);
    return std::vector<Tensor>{y.detach(), x.grad(), w1.grad(), w2.grad(), gamma.grad(), beta.grad()};
  };
  ConvSettingsGuard direct(ConvEngine::OneDNN, ConvAlgorithm::Direct);
  const auto blocked = run(true), plain = run(false);
  for (size_t i = 0; i < blocked.size(); ++i) EXPECT_LT(relative_error(blocked[i], plain[i]), 2e-6) << "result " << i;
}

TEST_F(OpaqueLayoutTest, PerChannelFactorsProductsNegationAndChannelSumsKeepTheLayout) {
  // What QConvBN's running fold and its gradient do to a convolution's output.
  for (int64_t channels : {20, 32}) {  // with and without padding lanes
    const Blocked x = blocked_activation(13, channels), y = blocked_activation(14, channels);
    manual_seed(15);
    const Tensor k = rand({1, channels, 1, 1}) + 0.5;
    const Tensor q = div(x.blocked, k);
    EXPECT_NE(layout_of(q), "plain");
    EXPECT_EQ(to_vector<float>(q), to_vector<float>(div(x.plain, k)));
    const Tensor p = mul(blocked_activation(13, channels).blocked, k.view({channels, 1, 1}));
    EXPECT_NE(layout_of(p), "plain");
    EXPECT_EQ(to_vector<float>(p), to_vector<float>(mul(x.plain, k.view({channels, 1, 1}))));
    const Tensor m = mul(blocked_activation(13, channels).blocked, y.blocked);
    EXPECT_NE(layout_of(m), "plain");
    EXPECT_EQ(to_vector<float>(m), to_vector<float>(mul(x.plain, y.plain)));
    const Tensor n = neg(blocked_activation(13, channels).blocked);
    EXPECT_NE(layout_of(n), "plain");
    EXPECT_EQ(to_vector<float>(n), to_vector<float>(neg(x.plain)));
    const Tensor b = blocked_activation(13, channels).blocked;
    const int64_t before = layout_conversion_count();
    const Tensor s = sum_to(b, {1, channels, 1, 1});
    EXPECT_EQ(layout_conversion_count(), before) << "a per-channel sum reads the blocked layout";
    EXPECT_LT(relative_error(s, sum_to(x.plain.to(DType::Float64), {1, channels, 1, 1})), 1e-6);
  }
}

TEST_F(OpaqueLayoutTest, WholeTensorExtremaReadUnpaddedStorageAsItIs) {
  const Blocked full = blocked_activation(16, 32), padded = blocked_activation(16, 20);
  const int64_t before = layout_conversion_count();
  EXPECT_EQ(amax(full.blocked).item<float>(), amax(full.plain).item<float>());
  EXPECT_EQ(amin(full.blocked).item<float>(), amin(full.plain).item<float>());
  EXPECT_EQ(layout_conversion_count(), before);
  EXPECT_NE(layout_of(full.blocked), "plain");
  // Padding lanes hold zeros that are not elements: a padded tensor is read plain.
  const Tensor squares = mul(padded.blocked, blocked_activation(16, 20).blocked);  // > 0, padding 0
  ASSERT_NE(layout_of(squares), "plain");
  EXPECT_GT(amin(squares).item<float>(), 0.0f);
  EXPECT_EQ(amin(squares).item<float>(), amin(mul(padded.plain, padded.plain)).item<float>());
}

TEST_F(OpaqueLayoutTest, SavedActivationsKeepTheirLayoutAfterTheOriginalIsConverted) {
  // relu saves its output; reading that output afterwards converts the original tensor in
  // place, and the saved alias must still describe its own bytes.
  Tensor x = blocked_activation(12).blocked.requires_grad_();
  Tensor y = relu(x);
  const std::vector<float> values = to_vector<float>(y);  // converts y in place
  y.sum().backward();
  const auto g = to_vector<float>(x.grad());
  for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], values[i] > 0 ? 1.0f : 0.0f) << i;
}

}  // namespace
