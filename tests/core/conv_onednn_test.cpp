// conv2d on oneDNN (Note [oneDNN convolution]): direct results against the im2col + OpenBLAS
// reference, Winograd's error against float64, the primitive and weight caches (including
// weights changed in place), and the engine/algorithm settings.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "qflow/qflow.h"
#include "relative_error.h"

using namespace qflow;
using ::testing::HasSubstr;

namespace {

struct Geometry {
  IntList x, w;
  IntList stride, padding, dilation;
  bool bias;
};

// Shapes that exercise oneDNN's paths: 3x3 stride 1 (Winograd-eligible), stride 2, 1x1,
// dilation, asymmetric kernels, a 3-channel stem, channel counts off the 16-block, batch 1.
const Geometry kGeometries[] = {
    {{4, 16, 12, 12}, {32, 16, 3, 3}, {1}, {1}, {1}, false},
    {{2, 32, 9, 9}, {16, 32, 3, 3}, {1}, {1}, {1}, true},
    {{3, 3, 11, 13}, {20, 3, 3, 3}, {1}, {1}, {1}, true},
    {{2, 24, 10, 10}, {40, 24, 3, 3}, {2}, {1}, {1}, false},
    {{2, 17, 8, 8}, {33, 17, 1, 1}, {1}, {0}, {1}, true},
    {{2, 16, 8, 8}, {32, 16, 1, 1}, {2}, {0}, {1}, false},
    {{1, 8, 14, 12}, {8, 8, 3, 5}, {1, 2}, {2, 1}, {2, 1}, true},
    {{1, 64, 4, 4}, {64, 64, 3, 3}, {1}, {1}, {1}, false},
};

std::string shapes(const Geometry& g) {
  return "input " + ::testing::PrintToString(g.x) + " weight " + ::testing::PrintToString(g.w);
}

using qflow::testing_util::relative_error;

struct Result {
  Tensor y, gx, gw, gb;
};

Result run(const Geometry& g, DType dtype, uint64_t seed = 7) {
  manual_seed(seed);
  const Tensor x = randn(g.x).to(dtype), w = randn(g.w).to(dtype);
  const Tensor b = g.bias ? randn({g.w[0]}).to(dtype) : Tensor();
  Result r;
  r.y = conv2d(x, w, b, g.stride, g.padding, g.dilation);
  manual_seed(seed + 1);
  const Tensor gy = randn(r.y.sizes()).to(dtype);
  std::tie(r.gx, r.gw, r.gb) = conv2d_backward(gy, x, w, g.stride, g.padding, g.dilation, 1, true, true, g.bias);
  return r;
}

TEST(ConvOneDnnTest, DirectMatchesIm2colReference) {
  for (const Geometry& g : kGeometries) {
    Result ref, dnn;
    {
      ConvSettingsGuard im2col(ConvEngine::Im2col, ConvAlgorithm::Direct);
      ref = run(g, DType::Float32);
    }
    {
      ConvSettingsGuard onednn(ConvEngine::OneDNN, ConvAlgorithm::Direct);
      EXPECT_EQ(conv2d_kernel_name(g.x, g.w, DType::Float32, g.stride, g.padding, g.dilation), "onednn-direct");
      dnn = run(g, DType::Float32);
    }
    // Same sums in another order: float32 reassociation. Each side is within 2.4e-6 of float64
    // (Note [Winograd tolerance]'s direct column), so the two are within 5e-6 of each other.
    EXPECT_LT(relative_error(dnn.y, ref.y), 5e-6) << "forward " << shapes(g);
    EXPECT_LT(relative_error(dnn.gx, ref.gx), 5e-6) << "grad input " << shapes(g);
    EXPECT_LT(relative_error(dnn.gw, ref.gw), 5e-6) << "grad weight " << shapes(g);
    if (g.bias) {
      EXPECT_LT(relative_error(dnn.gb, ref.gb), 5e-6) << "grad bias " << shapes(g);
    }
  }
}

// Note [Winograd tolerance]
// F(4x4, 3x3) multiplies by transform matrices with entries up to 8 and sums 36 products per
// tile where direct convolution sums 9, so its float32 rounding error is larger than direct's.
// Measured against float64 over 20 seeds of N(0, 1) data (max error / max |output|):
//   shape (input x weight)          direct fwd / data / weights    Winograd fwd / data / weights
//   [4,16,12,12] x [32,16,3,3]      7.0e-7 / 4.3e-7 / 1.0e-6       1.5e-6 / 1.8e-6 / 8.2e-7
//   [2,64,16,16] x [64,64,3,3]      3.9e-7 / 4.7e-7 / 1.2e-6       2.7e-6 / 2.5e-6 / 1.3e-6
//   [8,128,16,16] x [128,128,3,3]   3.6e-7 / 3.7e-7 / 2.4e-6       2.8e-6 / 3.0e-6 / 2.2e-6
//   [8,512,4,4] x [512,512,3,3]     3.5e-7 / 3.4e-7 / 5.6e-7       3.7e-6 / 3.4e-6 / 9.2e-7
// Winograd stays within ~8x direct's forward error and grows slowly with the channel count.
// The bound is 2.7x the largest figure (ResNet18's widest layer): a wrong transform or tile
// offset gives errors of order 1.
constexpr double kWinogradTolerance = 1e-5;

TEST(ConvOneDnnTest, WinogradErrorIsBoundedAgainstFloat64) {
  const Geometry winograd_shapes[] = {kGeometries[0], kGeometries[1], kGeometries[7], {{2, 64, 16, 16}, {64, 64, 3, 3}, {1}, {1}, {1}, true}};
  for (const Geometry& g : winograd_shapes) {
    ConvSettingsGuard winograd(ConvEngine::OneDNN, ConvAlgorithm::Winograd);
    if (conv2d_kernel_name(g.x, g.w, DType::Float32, g.stride, g.padding, g.dilation) != "onednn-winograd")
      GTEST_SKIP() << "oneDNN has no Winograd kernel for this CPU (it needs AVX-512)";
    for (uint64_t seed : {1, 2, 3}) {
      const Result f32 = run(g, DType::Float32, seed);
      const Result f64 = run(g, DType::Float64, seed);
      EXPECT_LT(relative_error(f32.y, f64.y), kWinogradTolerance) << "forward " << shapes(g) << " seed " << seed;
      EXPECT_LT(relative_error(f32.gx, f64.gx), kWinogradTolerance) << "grad input " << shapes(g) << " seed " << seed;
      EXPECT_LT(relative_error(f32.gw, f64.gw), kWinogradTolerance) << "grad weight " << shapes(g) << " seed " << seed;
    }
  }
}

TEST(ConvOneDnnTest, AutoTakesWinogradOnlyWhereItPays) {
  ConvSettingsGuard automatic(ConvEngine::OneDNN, ConvAlgorithm::Auto);
  // 4 images of 16x16: 64 output tiles of 4x4, the smallest batch where Winograd measured faster.
  if (conv2d_kernel_name({4, 64, 16, 16}, {64, 64, 3, 3}, DType::Float32, {1}, {1}) != "onednn-winograd")
    GTEST_SKIP() << "oneDNN has no Winograd kernel for this CPU";
  EXPECT_EQ(conv2d_kernel_name({1, 64, 16, 16}, {64, 64, 3, 3}, DType::Float32, {1}, {1}), "onednn-direct")
      << "16 tiles: the transforms cost more than they save";
  EXPECT_EQ(conv2d_kernel_name({128, 512, 4, 4}, {512, 512, 3, 3}, DType::Float32, {1}, {1}), "onednn-winograd");
  EXPECT_EQ(conv2d_kernel_name({4, 64, 16, 16}, {128, 64, 3, 3}, DType::Float32, {2}, {1}), "onednn-direct");
  EXPECT_EQ(conv2d_kernel_name({4, 64, 16, 16}, {128, 64, 1, 1}, DType::Float32, {2}, {0}), "onednn-direct");
  EXPECT_EQ(conv2d_kernel_name({4, 3, 32, 32}, {64, 3, 3, 3}, DType::Float32, {1}, {1}), "onednn-direct");
  ConvSettingsGuard direct(ConvEngine::OneDNN, ConvAlgorithm::Direct);
  EXPECT_EQ(conv2d_kernel_name({4, 64, 16, 16}, {64, 64, 3, 3}, DType::Float32, {1}, {1}), "onednn-direct");
}

TEST(ConvOneDnnTest, OtherDtypesAndGroupsKeepTheirKernels) {
  ConvSettingsGuard onednn(ConvEngine::OneDNN, ConvAlgorithm::Auto);
  EXPECT_EQ(conv2d_kernel_name({2, 16, 8, 8}, {16, 16, 3, 3}, DType::Float64, {1}, {1}), "im2col");
  EXPECT_EQ(conv2d_kernel_name({2, 16, 8, 8}, {16, 1, 3, 3}, DType::Float32, {1}, {1}, {1}, 16), "depthwise");
  EXPECT_EQ(conv2d_kernel_name({2, 16, 8, 8}, {16, 8, 3, 3}, DType::Float32, {1}, {1}, {1}, 2), "im2col");
  ConvSettingsGuard im2col(ConvEngine::Im2col, ConvAlgorithm::Auto);
  EXPECT_EQ(conv2d_kernel_name({2, 16, 8, 8}, {16, 16, 3, 3}, DType::Float32, {1}, {1}), "im2col");
}

TEST(ConvOneDnnTest, PrimitivesAndReorderedWeightsAreCachedUntilTheWeightChanges) {
  ConvSettingsGuard onednn(ConvEngine::OneDNN, ConvAlgorithm::Direct);
  clear_conv_cache();
  manual_seed(3);
  const Tensor x = randn({2, 16, 10, 10});
  Tensor w = randn({32, 16, 3, 3});
  const Tensor y1 = conv2d(x, w, std::nullopt, {1}, {1});
  const ConvCacheStats s1 = conv_cache_stats();
  EXPECT_EQ(s1.primitives, 1);
  const Tensor y2 = conv2d(x, w, std::nullopt, {1}, {1});
  const ConvCacheStats s2 = conv_cache_stats();
  EXPECT_EQ(s2.primitive_misses, s1.primitive_misses) << "the second call must reuse the primitive";
  EXPECT_EQ(s2.weight_reorders, s1.weight_reorders) << "unchanged weights must not be reordered again";
  EXPECT_EQ(s2.weight_reuses, s1.weight_reuses + 1);
  EXPECT_EQ(to_vector<float>(y2), to_vector<float>(y1));

  // An in-place update (what an optimizer step does) bumps the version: the next call must
  // see the new weights, not the cached reorder of the old ones.
  w.add_(ones_like(w), 0.5);
  const Tensor y3 = conv2d(x, w, std::nullopt, {1}, {1});
  EXPECT_EQ(conv_cache_stats().weight_reorders, s2.weight_reorders + 1);
  // A weight that changes between calls is being trained: its reorders are not kept
  // (Note [Which reordered weights are kept]); once it stays, the next call keeps one again.
  (void)conv2d(x, w, std::nullopt, {1}, {1});
  EXPECT_EQ(conv_cache_stats().weight_reorders, s2.weight_reorders + 2);
  (void)conv2d(x, w, std::nullopt, {1}, {1});
  EXPECT_EQ(conv_cache_stats().weight_reorders, s2.weight_reorders + 2);
  EXPECT_EQ(conv_cache_stats().weight_reuses, s2.weight_reuses + 1);
  ConvSettingsGuard im2col(ConvEngine::Im2col, ConvAlgorithm::Direct);
  EXPECT_LT(relative_error(y3, conv2d(x, w, std::nullopt, {1}, {1})), 5e-6);
}

TEST(ConvOneDnnTest, UnbatchedAndNonContiguousInputs) {
  ConvSettingsGuard onednn(ConvEngine::OneDNN, ConvAlgorithm::Auto);
  manual_seed(5);
  const Tensor x = randn({16, 9, 9});
  const Tensor w = randn({16, 16, 3, 3});
  const Tensor xt = randn({2, 9, 9, 16}).permute({0, 3, 1, 2});  // NHWC strides
  const Tensor y = conv2d(x, w, std::nullopt, {1}, {1});
  const Tensor yt = conv2d(xt, w, std::nullopt, {1}, {1});
  ConvSettingsGuard im2col(ConvEngine::Im2col, ConvAlgorithm::Auto);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{16, 9, 9}));
  EXPECT_LT(relative_error(y, conv2d(x, w, std::nullopt, {1}, {1})), kWinogradTolerance);
  EXPECT_LT(relative_error(yt, conv2d(xt, w, std::nullopt, {1}, {1})), kWinogradTolerance);
}

TEST(ConvOneDnnTest, SettingsParseTheirNamesAndRefuseOthers) {
  EXPECT_EQ(parse_conv_engine("im2col"), ConvEngine::Im2col);
  EXPECT_EQ(parse_conv_engine("onednn"), ConvEngine::OneDNN);
  EXPECT_EQ(parse_conv_algorithm("winograd"), ConvAlgorithm::Winograd);
  EXPECT_STREQ(to_string(ConvAlgorithm::Direct), "direct");
  try {
    parse_conv_algorithm("fft");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("unknown convolution algorithm 'fft': expected auto, direct or winograd"));
  }
}

}  // namespace
