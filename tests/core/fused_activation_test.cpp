// The fused activations batch_norm_relu and add_relu (Note [Batch norm fused with ReLU] in
// core/kernels/nn/norm.cpp): outputs, running statistics and gradients equal the unfused pairs
// bit for bit, in the plain layout and in oneDNN's blocked one; bad arguments name the op.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "qflow/qflow.h"
#include "error_of.h"

using namespace qflow;
using ::testing::HasSubstr;

namespace {

using qflow::testing_util::error_of;

void expect_same(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  EXPECT_EQ(to_vector<float>(a), to_vector<float>(b)) << what;
}

struct BnRun {
  Tensor y, gx, gw, gb, running_mean, running_var;
  bool blocked_output = false;
};

// relu(batch_norm(x)) or batch_norm_relu(x), forward and backward with gradient `g`.
// `make_input` builds the input (plain, or blocked by a convolution) from the leaf x0.
BnRun bn_relu_run(bool fused, bool training, bool affine, const Tensor& x0, const Tensor& g,
                  const std::function<Tensor(const Tensor&)>& make_input) {
  Tensor x = x0.detach().requires_grad_();
  const Tensor input = make_input(x);
  const int64_t C = input.sizes()[1];
  manual_seed(3);
  Tensor w = affine ? (rand({C}) + 0.5).requires_grad_() : Tensor();
  Tensor b = affine ? randn({C}).requires_grad_() : Tensor();
  Tensor rm = randn({C}) * 0.1, rv = rand({C}) + 0.5;
  Tensor y = fused ? batch_norm_relu(input, w, b, rm, rv, training, 0.1, 1e-5)
                   : relu(batch_norm(input, w, b, rm, rv, training, 0.1, 1e-5));
  const bool blocked = y.impl()->opaque_layout() != nullptr;
  y.backward(g);
  return {y.detach(), x.grad(), affine ? w.grad() : Tensor(), affine ? b.grad() : Tensor(), rm, rv, blocked};
}

void expect_same_runs(const BnRun& fused, const BnRun& pair, const std::string& what) {
  expect_same(fused.y, pair.y, what + " output");
  expect_same(fused.gx, pair.gx, what + " grad input");
  if (fused.gw.defined()) {
    expect_same(fused.gw, pair.gw, what + " grad weight");
    expect_same(fused.gb, pair.gb, what + " grad bias");
  }
  expect_same(fused.running_mean, pair.running_mean, what + " running_mean");
  expect_same(fused.running_var, pair.running_var, what + " running_var");
}

Tensor identity(const Tensor& x) { return x; }

}  // namespace

TEST(FusedActivationTest, BatchNormReluEqualsTheUnfusedPairBitForBit) {
  for (const IntList& shape : {IntList{4, 5, 6, 6}, IntList{8, 3}, IntList{2, 4, 7}}) {
    manual_seed(1);
    const Tensor x = randn(shape), g = randn(shape);
    for (bool training : {true, false}) {
      for (bool affine : {true, false}) {
        const std::string what = fmt::format("shape {} training {} affine {}", shape, training, affine);
        expect_same_runs(bn_relu_run(true, training, affine, x, g, identity),
                         bn_relu_run(false, training, affine, x, g, identity), what);
      }
    }
  }
}

TEST(FusedActivationTest, BatchNormReluKeepsABlockedInputBlockedAndEqualsThePair) {
  // The input comes out of a oneDNN convolution in its blocked layout (20 channels: padding lanes).
  manual_seed(2);
  const Tensor x = randn({2, 8, 6, 6}), w = randn({20, 8, 3, 3}) * 0.2, g = randn({2, 20, 6, 6});
  ConvSettingsGuard direct(ConvEngine::OneDNN, ConvAlgorithm::Direct);
  set_conv_keeps_blocked_layout(true);
  const auto conv = [&](const Tensor& in) { return conv2d(in, w, std::nullopt, {1}, {1}); };
  const Tensor probe = conv(x);
  if (probe.impl()->opaque_layout() == nullptr) GTEST_SKIP() << "oneDNN chose a plain layout on this CPU";
  for (bool training : {true, false}) {
    const BnRun fused = bn_relu_run(true, training, true, x, g, conv);
    EXPECT_TRUE(fused.blocked_output) << "the fused output stays blocked";
    expect_same_runs(fused, bn_relu_run(false, training, true, x, g, conv), fmt::format("blocked training {}", training));
  }
}

TEST(FusedActivationTest, AddReluEqualsTheUnfusedPairIncludingBroadcastGradients) {
  manual_seed(4);
  const Tensor a0 = randn({3, 4, 5}), b0 = randn({4, 1}), g = randn({3, 4, 5});
  auto run = [&](bool fused) {
    Tensor a = a0.detach().requires_grad_(), b = b0.detach().requires_grad_();
    Tensor y = fused ? add_relu(a, b) : relu(add(a, b));
    y.backward(g);
    return std::vector<Tensor>{y.detach(), a.grad(), b.grad()};
  };
  const auto fused = run(true), pair = run(false);
  for (size_t i = 0; i < fused.size(); ++i) expect_same(fused[i], pair[i], fmt::format("result {}", i));
  EXPECT_EQ(fused[2].sizes(), (std::vector<int64_t>{4, 1}));
}

TEST(FusedActivationTest, AddReluOnBlockedActivationsStaysBlocked) {
  manual_seed(5);
  const Tensor x = randn({2, 8, 6, 6}), w1 = randn({20, 8, 3, 3}), w2 = randn({20, 8, 3, 3}), g = randn({2, 20, 6, 6});
  ConvSettingsGuard direct(ConvEngine::OneDNN, ConvAlgorithm::Direct);
  set_conv_keeps_blocked_layout(true);
  auto run = [&](bool fused) {
    Tensor xl = x.detach().requires_grad_();
    const Tensor p = conv2d(xl, w1, std::nullopt, {1}, {1}), q = conv2d(xl, w2, std::nullopt, {1}, {1});
    Tensor y = fused ? add_relu(p, q) : relu(add(p, q));
    const bool blocked = y.impl()->opaque_layout() != nullptr;
    y.backward(g);
    return std::make_pair(blocked, std::vector<Tensor>{y.detach(), xl.grad()});
  };
  const auto [fused_blocked, fused] = run(true);
  const auto [pair_blocked, pair] = run(false);
  if (!pair_blocked) GTEST_SKIP() << "oneDNN chose a plain layout on this CPU";
  EXPECT_TRUE(fused_blocked);
  for (size_t i = 0; i < fused.size(); ++i) expect_same(fused[i], pair[i], fmt::format("result {}", i));
  // A plain operand joins the blocked one's layout.
  expect_same(add_relu(conv2d(x, w1, std::nullopt, {1}, {1}), randn({2, 20, 6, 6}) * 0 + 1),
              relu(add(conv2d(x, w1, std::nullopt, {1}, {1}), ones({2, 20, 6, 6}))), "blocked + plain");
}

TEST(FusedActivationTest, ReluSemanticsAtZeroAndNaN) {
  // relu's conventions carry over: NaN propagates, the gradient at an output of 0 is 0.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor a = from_vector<float>({-1.0f, 0.0f, 2.0f, nan}).requires_grad_();
  const Tensor b = from_vector<float>({1.0f, 0.0f, -1.0f, 0.0f});
  Tensor y = add_relu(a, b);
  const auto v = to_vector<float>(y);
  EXPECT_EQ(v[0], 0.0f);
  EXPECT_EQ(v[1], 0.0f);
  EXPECT_EQ(v[2], 1.0f);
  EXPECT_TRUE(std::isnan(v[3]));
  y.sum().backward();
  EXPECT_EQ(to_vector<float>(a.grad()), (std::vector<float>{0.0f, 0.0f, 1.0f, 0.0f}));
}

TEST(FusedActivationTest, BadArgumentsNameTheOpAndTheShapes) {
  EXPECT_THAT(error_of([] { add_relu(zeros({2, 3}), zeros({4})); }), HasSubstr("add_relu"));
  EXPECT_THAT(error_of([] { add_relu(zeros({2, 3}), zeros({4})); }), HasSubstr("[4]"));
  EXPECT_THAT(error_of([] { add_relu(zeros({2}), zeros({2}, DType::Float64)); }),
              HasSubstr("add_relu: expected floating point tensors of one dtype"));
  EXPECT_THAT(error_of([] { add_relu(zeros({2}, DType::Int64), zeros({2}, DType::Int64)); }), HasSubstr("add_relu"));
  EXPECT_THAT(error_of([] { batch_norm_relu(zeros({2, 3, 4, 4}), ones({4}), Tensor(), Tensor(), Tensor(), true); }),
              HasSubstr("batch_norm_relu: weight has shape [4], expected [3]"));
  EXPECT_THAT(error_of([] {
                batch_norm_relu_backward(zeros({2, 3, 4, 4}), zeros({2, 3, 4}), zeros({2, 3, 4, 4}), Tensor(), Tensor(),
                                         Tensor(), true, 1e-5);
              }),
              HasSubstr("batch_norm_relu_backward: grad_output has shape [2, 3, 4, 4] and output has shape [2, 3, 4]"));
  EXPECT_THAT(error_of([] { batch_norm_relu(zeros({2, 3}), Tensor(), Tensor(), Tensor(), Tensor(), false); }),
              HasSubstr("running_mean and running_var are required"));
}

TEST(FusedActivationTest, Conv2dReluEqualsTheUnfusedPairOnEveryEngine) {
  // oneDNN applies the ReLU as a post-op, im2col as relu_ on its output; forward and gradients
  // equal relu(conv2d) on each (a shape Winograd takes at batch 8, and a strided one it does not).
  struct Case {
    ConvEngine engine;
    ConvAlgorithm algo;
  };
  for (const Case c : {Case{ConvEngine::OneDNN, ConvAlgorithm::Auto}, Case{ConvEngine::OneDNN, ConvAlgorithm::Direct},
                       Case{ConvEngine::Im2col, ConvAlgorithm::Auto}}) {
    for (int64_t stride : {1, 2}) {
      ConvSettingsGuard settings(c.engine, c.algo);
      manual_seed(6);
      const Tensor x0 = randn({8, 16, 8, 8}), w = randn({16, 16, 3, 3}) * 0.1, b = randn({16}), g = randn({8, 16, 8 / stride, 8 / stride});
      auto run = [&](bool fused) {
        Tensor x = x0.detach().requires_grad_();
        Tensor y = fused ? conv2d_relu(x, w, b, {stride}, {1}) : relu(conv2d(x, w, b, {stride}, {1}));
        y.backward(g);
        return std::vector<Tensor>{y.detach(), x.grad()};
      };
      const auto fused = run(true), pair = run(false);
      for (size_t i = 0; i < fused.size(); ++i)
        expect_same(fused[i], pair[i], fmt::format("{} stride {} result {}", conv2d_kernel_name(x0.sizes(), w.sizes(), DType::Float32, {stride}, {1}, {1}, 1), stride, i));
    }
  }
  EXPECT_THAT(error_of([] { conv2d_relu(zeros({1, 3, 4, 4}), zeros({2, 4, 3, 3})); }), HasSubstr("conv2d_relu"));
}

TEST(FusedActivationTest, MulSumToEqualsSumToOfTheProductPlainAndBlocked) {
  // The gradient of QConvBN's per-channel divisor: sum over all but the channel of g * y.
  manual_seed(9);
  const Tensor g = randn({2, 20, 5, 5}), y = randn({2, 20, 5, 5});
  EXPECT_EQ(to_vector<float>(mul_sum_to(g, y, {1, 20, 1, 1})), to_vector<float>(sum_to(mul(g, y), {1, 20, 1, 1})));
  EXPECT_EQ(to_vector<float>(mul_sum_to(g, y, {20, 1, 1})), to_vector<float>(sum_to(mul(g, y), {20, 1, 1})));
  EXPECT_EQ(to_vector<float>(mul_sum_to(g, y, {5})), to_vector<float>(sum_to(mul(g, y), {5})));
  // Blocked operands (oneDNN convolution outputs) are summed in place, in double across runs.
  ConvSettingsGuard direct(ConvEngine::OneDNN, ConvAlgorithm::Direct);
  set_conv_keeps_blocked_layout(true);
  const Tensor x = randn({2, 8, 5, 5}), w1 = randn({20, 8, 3, 3}), w2 = randn({20, 8, 3, 3});
  const Tensor a = conv2d(x, w1, std::nullopt, {1}, {1}), b = conv2d(x, w2, std::nullopt, {1}, {1});
  if (a.impl()->opaque_layout() == nullptr) GTEST_SKIP() << "oneDNN chose a plain layout on this CPU";
  const Tensor fused = mul_sum_to(a, b, {1, 20, 1, 1});
  EXPECT_NE(a.impl()->opaque_layout(), nullptr) << "the operands stay blocked";
  const Tensor reference = sum_to(mul(a.to(DType::Float64), b.to(DType::Float64)), {1, 20, 1, 1});
  const auto got = to_vector<float>(fused);
  const auto want = to_vector<double>(reference);
  for (size_t c = 0; c < got.size(); ++c) EXPECT_NEAR(got[c], want[c], 1e-5 * (1.0 + std::abs(want[c]))) << "channel " << c;
  EXPECT_THAT(error_of([] { mul_sum_to(zeros({2, 3}), zeros({3}), {3}); }), HasSubstr("mul_sum_to: expected self and other of one shape"));
}
