// quantized_conv2d (Note [Integer convolution]): oneDNN's integer kernels against the exact
// float64 sums, for uint8 inputs with a zero point and int8 inputs, per-channel and per-tensor
// scales, bias, ReLU, padding and stride; the residual add; integer outputs on a grid (the next
// layer's input); chains in oneDNN's nhwc layout; the fallback path; errors that name the op.
#include <algorithm>
#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.h"
#include "qflow/core/opaque_tensor.h"
#include "qflow/qflow.h"
#include "relative_error.h"

using namespace qflow;
using qflow::testing_util::error_of;
using qflow::testing_util::relative_error;
using ::testing::HasSubstr;

namespace {

// Random integers in [lo, hi] as `dtype`.
Tensor random_ints(const IntList& shape, int64_t lo, int64_t hi, DType dtype) {
  return randint(lo, hi + 1, shape).to(dtype);
}

// The formula of the Note in float64: scale * sum((x - zp) * w) + bias, then relu.
Tensor reference(const Tensor& x, int64_t zp, const Tensor& w, const Tensor& scale, const Tensor& bias, IntList stride,
                 IntList padding, bool relu) {
  const int64_t o = w.sizes()[0];
  Tensor y = conv2d(x.to(DType::Float64) - zp, w.to(DType::Float64), std::nullopt, stride, padding);
  y = y * (scale.numel() == 1 ? scale.to(DType::Float64).reshape({}) : scale.to(DType::Float64).view({1, o, 1, 1}));
  if (bias.defined()) y = y + bias.to(DType::Float64).view({1, o, 1, 1});
  return relu ? y.relu() : y;
}

}  // namespace

TEST(QuantizedConvTest, IntegerKernelsEqualTheExactSumsScaled) {
  struct Case {
    DType input;
    int64_t zero_point;
    bool per_channel, with_bias, relu;
    int64_t stride, padding;
  };
  for (const Case c : {Case{DType::UInt8, 37, true, true, false, 1, 1}, Case{DType::UInt8, 0, false, false, true, 2, 1},
                       Case{DType::Int8, 0, true, true, true, 1, 0}, Case{DType::UInt8, 128, true, false, false, 1, 2},
                       Case{DType::UInt8, -5, true, true, false, 1, 1}}) {  // a range above 0: zp < 0
    for (ConvEngine engine : {ConvEngine::OneDNN, ConvEngine::Im2col}) {
      ConvSettingsGuard settings(engine, ConvAlgorithm::Auto);
      manual_seed(1);
      const bool u8 = c.input == DType::UInt8;
      const Tensor x = random_ints({2, 32, 9, 9}, u8 ? 0 : -128, u8 ? 255 : 127, c.input);
      const Tensor w = random_ints({24, 32, 3, 3}, -127, 127, DType::Int8);
      const Tensor scale = c.per_channel ? rand({24}) * 1e-3 + 1e-4 : full({1}, 3e-4);
      const Tensor bias = c.with_bias ? randn({24}) : Tensor();
      const Tensor y = quantized_conv2d(x, w, scale, bias, c.zero_point, {c.stride}, {c.padding}, {1}, 1, c.relu);
      const Tensor want = reference(x, c.zero_point, w, scale, bias, {c.stride}, {c.padding}, c.relu);
      EXPECT_EQ(y.dtype(), DType::Float32);
      EXPECT_EQ(y.sizes(), want.sizes());
      // float32 scaling of exact sums (oneDNN: (sum + bias / scale) * scale): a few ulps.
      EXPECT_LT(relative_error(y, want), 1e-6) << dtype_name(c.input) << " zp " << c.zero_point << " engine "
                                               << static_cast<int>(engine);
    }
  }
}

TEST(QuantizedConvTest, AddsTheResidualBeforeTheRelu) {
  for (ConvEngine engine : {ConvEngine::OneDNN, ConvEngine::Im2col}) {
    ConvSettingsGuard settings(engine, ConvAlgorithm::Auto);
    manual_seed(3);
    const Tensor x = random_ints({2, 16, 8, 8}, 0, 255, DType::UInt8);
    const Tensor w = random_ints({16, 16, 3, 3}, -127, 127, DType::Int8);
    const Tensor scale = rand({16}) * 1e-4 + 1e-5, bias = randn({16}), residual = randn({2, 16, 8, 8});
    const Tensor y = quantized_conv2d(x, w, scale, bias, 7, {1}, {1}, {1}, 1, true, residual);
    const Tensor want = (reference(x, 7, w, scale, bias, {1}, {1}, false) + residual.to(DType::Float64)).relu();
    EXPECT_LT(relative_error(y, want), 1e-6) << static_cast<int>(engine);
  }
}

// An integer output is the next layer's quantized input: round_half_even(y) + zero point,
// clamped to the grid, with y in units of the next scale (folded into output_scale and bias).
TEST(QuantizedConvTest, IntegerOutputsRoundTheScaledResultOntoTheGrid) {
  struct Case {
    DType out;
    int64_t zero_point, min, max;
    bool relu;
  };
  for (const Case c : {Case{DType::UInt8, 0, 0, 255, true}, Case{DType::UInt8, 113, 0, 255, false},
                       Case{DType::Int8, 0, -127, 127, false}, Case{DType::UInt8, 3, 0, 15, false}}) {  // 4 bits
    for (ConvEngine engine : {ConvEngine::OneDNN, ConvEngine::Im2col}) {
      ConvSettingsGuard settings(engine, ConvAlgorithm::Auto);
      manual_seed(4);
      const Tensor x = random_ints({2, 32, 7, 7}, 0, 255, DType::UInt8);
      const Tensor w = random_ints({16, 32, 3, 3}, -127, 127, DType::Int8);
      const Tensor scale = rand({16}) * 2e-3 + 1e-4, bias = randn({16}) * 4;  // y beyond the grid
      const QuantizedOutput out{c.out, c.zero_point, c.min, c.max};
      const Tensor q = quantized_conv2d(x, w, scale, bias, 9, {1}, {1}, {1}, 1, c.relu, Tensor(), out);
      ASSERT_EQ(q.dtype(), c.out);
      const Tensor y = reference(x, 9, w, scale, bias, {1}, {1}, c.relu);
      const std::vector<double> yv = to_vector<double>(y);
      const std::vector<int64_t> qv = to_vector<int64_t>(q.to(DType::Int64));
      int64_t off = 0, clamped = 0;
      for (size_t i = 0; i < yv.size(); ++i) {
        const double want = std::clamp(std::nearbyint(yv[i]) + c.zero_point, double(c.min), double(c.max));
        clamped += want == c.min || want == c.max;
        // Exact up to the float32 rounding of y: only a value within 1e-4 of a tie may differ.
        if (qv[i] != static_cast<int64_t>(want)) {
          ++off;
          EXPECT_LT(std::abs(std::abs(yv[i] - std::floor(yv[i])) - 0.5), 1e-4) << i << " " << yv[i];
        }
      }
      EXPECT_LE(off, 2) << dtype_name(c.out) << " engine " << static_cast<int>(engine);
      EXPECT_GT(clamped, 0);  // the grid's bounds were reached
    }
  }
}

// On oneDNN, outputs stay in the kernels' nhwc layout and the next integer layer, quantize, the
// residual add and ReLU take them as they are: a two-layer chain converts nothing in between.
TEST(QuantizedConvTest, ChainsRunInTheKernelsLayoutWithoutConversions) {
  ConvSettingsGuard settings(ConvEngine::OneDNN, ConvAlgorithm::Auto);
  manual_seed(5);
  const Tensor x = random_ints({2, 32, 8, 8}, 0, 255, DType::UInt8);
  const Tensor w1 = random_ints({32, 32, 3, 3}, -127, 127, DType::Int8);
  const Tensor w2 = random_ints({32, 32, 3, 3}, -127, 127, DType::Int8);
  const Tensor s = full({1}, 2e-5), b = randn({32});
  const QuantizedOutput grid{DType::UInt8, 0, 0, 255};
  const Tensor h = quantized_conv2d(x, w1, s, b, 3, {1}, {1}, {1}, 1, true, Tensor(), grid);  // u8, nhwc
  const Tensor y = quantized_conv2d(x, w1, s * 0.5, b, 3, {1}, {1}, {1}, 1, false);        // f32, nhwc
  reset_layout_conversion_count();
  const Tensor z = quantized_conv2d(h, w2, s, Tensor(), 0, {1}, {1}, {1}, 1, true, y);
  EXPECT_EQ(layout_conversion_count(), 0);
  // The same values from plain inputs.
  const Tensor z_plain = quantized_conv2d(h.contiguous(), w2, s, Tensor(), 0, {1}, {1}, {1}, 1, true, y.contiguous());
  EXPECT_EQ(to_vector<float>(z), to_vector<float>(z_plain));
}

// Grouped and depthwise layers (MobileNetV2's) run oneDNN's grouped int8 kernels; the im2col
// engine's float64 sums are exact too.
TEST(QuantizedConvTest, GroupedAndDepthwiseLayersEqualTheExactSums) {
  struct Case {
    int64_t channels, out, groups, stride;
  };
  for (const Case c : {Case{32, 32, 32, 1}, Case{32, 32, 32, 2}, Case{16, 24, 4, 1}}) {
    for (ConvEngine engine : {ConvEngine::OneDNN, ConvEngine::Im2col}) {
      ConvSettingsGuard settings(engine, ConvAlgorithm::Auto);
      manual_seed(2);
      const Tensor x = random_ints({2, c.channels, 9, 9}, 0, 255, DType::UInt8);
      const Tensor w = random_ints({c.out, c.channels / c.groups, 3, 3}, -127, 127, DType::Int8);
      const Tensor scale = rand({c.out}) * 1e-2 + 1e-4, bias = randn({c.out});
      const Tensor y = quantized_conv2d(x, w, scale, bias, 5, {c.stride}, {1}, {1}, c.groups, true);
      const Tensor want = (conv2d(x.to(DType::Float64) - 5, w.to(DType::Float64), std::nullopt, {c.stride}, {1}, {1},
                                  c.groups) *
                               scale.to(DType::Float64).view({1, c.out, 1, 1}) +
                           bias.to(DType::Float64).view({1, c.out, 1, 1}))
                              .relu();
      EXPECT_LT(relative_error(y, want), 1e-6) << c.groups << " groups, engine " << static_cast<int>(engine);
    }
  }
}

TEST(QuantizedConvTest, ZeroScaleLayersTakeTheExactPath) {
  manual_seed(2);
  const Tensor x = random_ints({1, 8, 5, 5}, 0, 255, DType::UInt8);
  // A zero scale (an all-zero layer) gives zeros plus the bias, not NaN.
  const Tensor w2 = random_ints({4, 8, 1, 1}, -127, 127, DType::Int8);
  const Tensor y2 = quantized_conv2d(x, w2, zeros({4}), ones({4}), 5);
  EXPECT_EQ(to_vector<float>(y2), std::vector<float>(y2.numel(), 1.0f));
}

// quantized_conv2d_add_ gives quantized_conv2d's result with the residual as `add`, written
// into the residual: in place (oneDNN's sum post-op) when the residual is in the kernel's nhwc
// layout, through a copy otherwise (a plain residual, the im2col engine).
TEST(QuantizedConvTest, AddingIntoTheResidualEqualsTheResidualPostOp) {
  for (ConvEngine engine : {ConvEngine::OneDNN, ConvEngine::Im2col}) {
    ConvSettingsGuard settings(engine, ConvAlgorithm::Auto);
    manual_seed(6);
    const Tensor x = random_ints({2, 32, 8, 8}, 0, 255, DType::UInt8);
    const Tensor w = random_ints({32, 32, 3, 3}, -127, 127, DType::Int8);
    const Tensor s = rand({32}) * 1e-4 + 1e-5, b = randn({32});
    // A residual as an integer layer writes it (nhwc on oneDNN), and a plain one; each made
    // twice (the same values), as converting or cloning one would change its layout.
    for (const bool plain : {false, true}) {
      const auto residual = [&] {
        const Tensor r = quantized_conv2d(x, w, s, b, 3, {1}, {1});
        return plain ? r.contiguous() : r;
      };
      const Tensor want = quantized_conv2d(x, w, s, b, 3, {1}, {1}, {1}, 1, true, residual());
      Tensor acc = residual();
      const bool in_kernel_layout = acc.impl()->opaque_layout() != nullptr;
      const void* bytes = opaque_storage_ptr(acc);
      const uint64_t version = acc.impl()->storage()->version();
      Tensor& got = quantized_conv2d_add_(acc, x, w, s, b, 3, {1}, {1}, {1}, 1, true);
      EXPECT_EQ(&got, &acc);
      EXPECT_GT(acc.impl()->storage()->version(), version);  // a write autograd can see
      if (in_kernel_layout) {
        EXPECT_EQ(opaque_storage_ptr(acc), bytes);  // summed where the residual lay
      }
      // The same float32 operations as the binary post-op: equal bit for bit.
      EXPECT_EQ(to_vector<float>(acc), to_vector<float>(want)) << "plain " << plain << " engine "
                                                               << static_cast<int>(engine);
    }
  }
}

TEST(QuantizedConvTest, BadArgumentsNameTheOp) {
  const Tensor x = zeros({1, 4, 5, 5}, DType::UInt8), w = zeros({2, 4, 3, 3}, DType::Int8), s = ones({2});
  EXPECT_THAT(error_of([&] { quantized_conv2d(zeros({1, 4, 5, 5}), w, s); }),
              HasSubstr("quantized_conv2d: expected a uint8 or int8 input, got float32"));
  EXPECT_THAT(error_of([&] { quantized_conv2d(x, zeros({2, 4, 3, 3}), s); }),
              HasSubstr("quantized_conv2d: expected int8 weights, got float32"));
  EXPECT_THAT(error_of([&] { quantized_conv2d(x, w, ones({3})); }),
              HasSubstr("quantized_conv2d: output_scale must be float32 with 1 or 2 (output channels) elements"));
  EXPECT_THAT(error_of([&] { quantized_conv2d(x, w, s, ones({3})); }),
              HasSubstr("quantized_conv2d: bias must be float32 of shape [2]"));
  EXPECT_THAT(error_of([&] { quantized_conv2d(x, w, s, Tensor(), int64_t{1} << 40); }),
              HasSubstr("quantized_conv2d: input_zero_point 1099511627776 does not fit int32"));
  EXPECT_THAT(error_of([&] { quantized_conv2d(x, zeros({2, 3, 3, 3}, DType::Int8), s); }), HasSubstr("quantized_conv2d"));
  EXPECT_THAT(error_of([&] { quantized_conv2d(x, w, s, Tensor(), 0, {1}, {0}, {1}, 1, false, zeros({1, 2, 4, 4})); }),
              HasSubstr("quantized_conv2d: add must be float32 of the output's shape [1, 2, 3, 3], got float32 of "
                        "shape [1, 2, 4, 4]"));
  EXPECT_THAT(error_of([&] {
                quantized_conv2d(x, w, s, Tensor(), 0, {1}, {0}, {1}, 1, false, zeros({1, 2, 3, 3}),
                                 {DType::UInt8, 0, 0, 255});
              }),
              HasSubstr("quantized_conv2d: add needs a float32 output, not uint8"));
  EXPECT_THAT(error_of([&] { quantized_conv2d(x, w, s, Tensor(), 0, {1}, {0}, {1}, 1, false, Tensor(), {DType::Int8, 0, -200, 0}); }),
              HasSubstr("quantized_conv2d: the output grid [-200, 0] does not fit int8"));
  EXPECT_THAT(error_of([&] { quantized_conv2d(x, w, s, Tensor(), 0, {1}, {0}, {1}, 1, false, Tensor(), {DType::UInt8, 300, 0, 255}); }),
              HasSubstr("quantized_conv2d: output_zero_point 300 lies outside the grid [0, 255]"));
  EXPECT_THAT(error_of([&] { quantized_conv2d(x, w, s, Tensor(), 0, {1}, {0}, {1}, 1, false, Tensor(), {DType::Int32, 0, 0, 1}); }),
              HasSubstr("quantized_conv2d: dtype must be float32, uint8 or int8, got int32"));
}
