// fake_quantize's backward: the straight-through estimators (pure and clipped), tested on the
// gradient values themselves (finite differences of a step function say nothing), plus fx
// recording the op.
#include "qflow/fx/fx.h"
#include "quant/quant_test_util.h"

using namespace qflow;
using namespace qflow::quant;
using ::testing::ElementsAre;
using quant_test::values;
using quant_test::vec;

namespace {

// Gradient of sum(fake_quantize(x) * weights) w.r.t. x: the estimator applied to `weights`.
std::vector<float> input_grad(const std::vector<float>& x_values, const Tensor& scale, const Tensor& zero_point,
                              int64_t qmin, int64_t qmax, bool clipped, const IntList& shape = {}, int64_t axis = 0) {
  Tensor x = vec(x_values);
  if (!shape.empty()) x = x.reshape(SymIntList(shape.begin(), shape.end())).contiguous();
  x.requires_grad_();
  const Tensor y = fake_quantize(x, scale, zero_point, qmin, qmax, axis, clipped);
  EXPECT_EQ(y.grad_fn_name(), "FakeQuantizeBackward");
  const Tensor w = arange(1, x.numel() + 1, 1, DType::Float32).reshape(SymIntList(x.sizes().begin(), x.sizes().end()));
  (y * w).sum().backward();
  return values(x.grad());
}

TEST(FakeQuantizeGradTest, PureEstimatorPassesTheGradientEverywhere) {
  // 3-bit grid [-4, 3], scale 1: values far outside the grid still get their gradient.
  EXPECT_THAT(input_grad({-9.0f, -4.6f, -4.5f, 0.2f, 3.5f, 100.0f}, vec({1.0f}), vec({0.0f}), -4, 3, false),
              ElementsAre(1, 2, 3, 4, 5, 6));
}

TEST(FakeQuantizeGradTest, ClippedEstimatorZeroesWhereTheRoundedValueLeavesTheGrid) {
  // round(-4.6) = -5 and round(3.5) = 4 leave [-4, 3]; round(-4.5) = -4 (half to even) stays.
  EXPECT_THAT(input_grad({-9.0f, -4.6f, -4.5f, -4.4f, 0.2f, 3.4f, 3.5f, 100.0f}, vec({1.0f}), vec({0.0f}), -4, 3, true),
              ElementsAre(0, 0, 3, 4, 5, 6, 0, 0));
}

TEST(FakeQuantizeGradTest, ClippedEstimatorUsesTheZeroPoint) {
  // 2-bit affine, scale 1, zero_point -2: grid [0, 3] covers x in [1.5, 5.5) (round half to even).
  EXPECT_THAT(input_grad({1.4f, 1.5f, 3.0f, 5.4f, 5.5f, 5.6f}, vec({1.0f}), vec({-2.0f}), 0, 3, true),
              ElementsAre(0, 2, 3, 4, 0, 0));
}

TEST(FakeQuantizeGradTest, ClippedEstimatorPerChannel) {
  // Rows scaled by 1 and 0.25 on the grid [-4, 3]: 2.0 is inside for row 0, 2.0 / 0.25 = 8 is not.
  EXPECT_THAT(input_grad({2.0f, -4.4f, 5.0f, 2.0f, -1.0f, 0.8f}, vec({1.0f, 0.25f}), vec({0.0f, 0.0f}), -4, 3, true,
                         {2, 3}),
              ElementsAre(1, 2, 0, 0, 5, 6));
}

TEST(FakeQuantizeGradTest, ZeroRangePassesTheGradientInBothEstimators) {
  EXPECT_THAT(input_grad({5.0f, -7.0f}, vec({0.0f}), vec({0.0f}), -4, 3, true), ElementsAre(1, 2));
  EXPECT_THAT(input_grad({5.0f, -7.0f}, vec({0.0f}), vec({0.0f}), -4, 3, false), ElementsAre(1, 2));
}

TEST(FakeQuantizeGradTest, ScaleAndZeroPointReceiveNoGradient) {
  Tensor x = vec({0.3f, 0.7f}).requires_grad_();
  Tensor scale = vec({0.5f}).requires_grad_();
  Tensor zero_point = vec({1.0f}).requires_grad_();
  fake_quantize(x, scale, zero_point, -4, 3, 0, true).sum().backward();
  EXPECT_THAT(values(x.grad()), ElementsAre(1, 1));
  EXPECT_FALSE(scale.grad().defined());
  EXPECT_FALSE(zero_point.grad().defined());
}

TEST(FakeQuantizeGradTest, Float64GradientsAndTheBackwardOpByName) {
  Tensor x = vec({-4.6f, 0.2f, 3.4f}).to(DType::Float64).requires_grad_();
  fake_quantize(x, vec({1.0f}), vec({0.0f}), -4, 3, 0, true).sum().backward();
  EXPECT_EQ(x.grad().dtype(), DType::Float64);
  EXPECT_THAT(to_vector<double>(x.grad()), ElementsAre(0.0, 1.0, 1.0));
  const Tensor g = fake_quantize_backward(vec({7.0f, 8.0f, 9.0f}), vec({-4.6f, 0.2f, 3.6f}), vec({1.0f}), vec({0.0f}), -4, 3);
  EXPECT_THAT(values(g), ElementsAre(0.0f, 8.0f, 0.0f));
}

// A module that calls the op directly: fx records it as call_function like any core op.
struct FakeQuantNet : nn::Cloneable<FakeQuantNet> {
  Tensor scale = register_buffer("scale", vec({0.5f}));
  Tensor zero_point = register_buffer("zero_point", vec({0.0f}));
  Tensor forward(const Tensor& x) override { return F::fake_quantize(x, scale, zero_point, -8, 7) * 2.0; }
};

TEST(FakeQuantizeGradTest, FxRecordsTheOpAndTheGraphRunsIt) {
  auto net = std::make_shared<FakeQuantNet>();
  auto gm = fx::symbolic_trace(net, vec({0.0f, 0.0f, 0.0f}));
  int calls = 0;
  for (const fx::Node* n : gm->graph().nodes())
    if (n->op() == fx::NodeOp::CallFunction && n->target() == "fake_quantize") ++calls;
  EXPECT_EQ(calls, 1) << gm->graph().to_string();
  EXPECT_THAT(values((*gm)(vec({0.3f, 0.8f, 9.0f}))), ElementsAre(1.0f, 2.0f, 7.0f));
}

}  // namespace
