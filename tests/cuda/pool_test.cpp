// CUDA pooling (cuda/kernels/pool.cu) against the CPU kernels (core/kernels/nn/pool.cpp):
// max_pool2d (+ indices, + backward), avg_pool2d (+ backward) and adaptive_avg_pool2d
// (+ backward) on LeNet5's 2x2 pools, ResNet's 3x3/2 stem pool and global average, odd sizes,
// padding, dilation, ceil_mode, count_include_pad and divisor_override, NCHW, channels-last and
// non-contiguous inputs, unbatched (C, H, W) inputs.
//
// Tolerances: max pooling selects values and its backward sums the same gradients in the same
// order (output index ascending), so both are exact (error 0) and the indices equal. Average
// pooling sums each window in the CPU's order (exact); only the global average of large
// NCHW planes is a warp tree, and the backward divides the same way: 1e-6 relative covers a
// few float roundings.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "qflow/qflow.h"

using namespace qflow;
using qflow::testing::Layout;
using qflow::testing::name;
using qflow::testing::gpu;
using qflow::testing_util::relative_error;

namespace {

constexpr double kAvgTol = 1e-6;

Tensor on_gpu(const Tensor& cpu, Layout layout) {
  Tensor g = cpu.to(gpu());
  if (layout == Layout::NCHW) return g.contiguous();
  if (cpu.dim() != 4) return g.transpose(-1, -2).contiguous().transpose(-1, -2);
  if (layout == Layout::ChannelsLast) return g.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
  return g.transpose(2, 3).contiguous().transpose(2, 3);
}

std::vector<int64_t> ints(const Tensor& t) { return to_vector<int64_t>(t.cpu()); }

struct MaxCase {
  std::vector<int64_t> sizes;
  IntList kernel, stride, padding, dilation;
  bool ceil_mode;
};

void check_max(const MaxCase& c, Layout layout) {
  SCOPED_TRACE(::testing::Message() << "sizes " << ::testing::PrintToString(c.sizes) << " kernel "
                                    << ::testing::PrintToString(c.kernel) << " stride "
                                    << ::testing::PrintToString(c.stride) << " " << name(layout));
  Generator gen(21 + c.sizes.back());
  const Tensor x = randn(c.sizes, DType::Float32, &gen);
  const Tensor xg = on_gpu(x, layout);
  auto [y_c, i_c] = max_pool2d_with_indices(x, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode);
  auto [y_g, i_g] = max_pool2d_with_indices(xg, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode);
  EXPECT_EQ(y_g.sizes(), y_c.sizes());
  EXPECT_EQ(relative_error(y_g.cpu(), y_c), 0.0);
  EXPECT_EQ(ints(i_g), ints(i_c)) << "indices (flat h * W + w per plane)";
  EXPECT_EQ(relative_error(max_pool2d(xg, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode).cpu(), y_c), 0.0);
  if (layout == Layout::ChannelsLast && c.sizes.size() == 4) {
    EXPECT_EQ(y_g.strides()[1], 1) << "a channels-last input gives a channels-last output";
  }
  const Tensor gy = randn(y_c.sizes(), DType::Float32, &gen);
  const Tensor gx_c = max_pool2d_with_indices_backward(gy, x, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode, i_c);
  const Tensor gx_g = max_pool2d_with_indices_backward(on_gpu(gy, layout), xg, c.kernel, c.stride, c.padding,
                                                       c.dilation, c.ceil_mode, i_g);
  EXPECT_EQ(relative_error(gx_g.cpu(), gx_c), 0.0) << "backward";
}

struct AvgCase {
  std::vector<int64_t> sizes;
  IntList kernel, stride, padding;
  bool ceil_mode, count_include_pad;
  std::optional<int64_t> divisor;
};

void check_avg(const AvgCase& c, Layout layout) {
  SCOPED_TRACE(::testing::Message() << "sizes " << ::testing::PrintToString(c.sizes) << " kernel "
                                    << ::testing::PrintToString(c.kernel) << " " << name(layout)
                                    << (c.ceil_mode ? " ceil" : "") << (c.count_include_pad ? " include_pad" : ""));
  Generator gen(31 + c.sizes.back());
  const Tensor x = randn(c.sizes, DType::Float32, &gen);
  const Tensor xg = on_gpu(x, layout);
  const Tensor y_c = avg_pool2d(x, c.kernel, c.stride, c.padding, c.ceil_mode, c.count_include_pad, c.divisor);
  const Tensor y_g = avg_pool2d(xg, c.kernel, c.stride, c.padding, c.ceil_mode, c.count_include_pad, c.divisor);
  EXPECT_EQ(y_g.sizes(), y_c.sizes());
  EXPECT_LE(relative_error(y_g.cpu(), y_c), kAvgTol);
  const Tensor gy = randn(y_c.sizes(), DType::Float32, &gen);
  const Tensor gx_c =
      avg_pool2d_backward(gy, x, c.kernel, c.stride, c.padding, c.ceil_mode, c.count_include_pad, c.divisor);
  const Tensor gx_g = avg_pool2d_backward(on_gpu(gy, layout), xg, c.kernel, c.stride, c.padding, c.ceil_mode,
                                          c.count_include_pad, c.divisor);
  EXPECT_LE(relative_error(gx_g.cpu(), gx_c), kAvgTol) << "backward";
}

void check_adaptive(const std::vector<int64_t>& sizes, const IntList& out, Layout layout) {
  SCOPED_TRACE(::testing::Message() << "sizes " << ::testing::PrintToString(sizes) << " -> "
                                    << ::testing::PrintToString(out) << " " << name(layout));
  Generator gen(41 + sizes.back());
  const Tensor x = randn(sizes, DType::Float32, &gen);
  const Tensor xg = on_gpu(x, layout);
  const Tensor y_c = adaptive_avg_pool2d(x, out);
  const Tensor y_g = adaptive_avg_pool2d(xg, out);
  EXPECT_EQ(y_g.sizes(), y_c.sizes());
  EXPECT_LE(relative_error(y_g.cpu(), y_c), kAvgTol);
  const Tensor gy = randn(y_c.sizes(), DType::Float32, &gen);
  EXPECT_LE(relative_error(adaptive_avg_pool2d_backward(on_gpu(gy, layout), xg).cpu(),
                           adaptive_avg_pool2d_backward(gy, x)),
            kAvgTol)
      << "backward";
}

const Layout kLayouts[] = {Layout::NCHW, Layout::ChannelsLast, Layout::Strided};

}  // namespace

TEST(CudaPoolTest, MaxPoolLeNetResNetAndEdgeCases) {
  QFLOW_REQUIRE_CUDA();
  const std::vector<MaxCase> cases = {
      {{64, 6, 28, 28}, {2}, {2}, {0}, {1}, false},        // LeNet5
      {{64, 16, 10, 10}, {2}, {2}, {0}, {1}, false},       // LeNet5
      {{8, 64, 112, 112}, {3}, {2}, {1}, {1}, false},      // ResNet's stem (overlapping windows)
      {{4, 5, 7, 9}, {3, 2}, {2, 1}, {1, 0}, {1}, true},   // odd sizes, ceil_mode
      {{2, 3, 11, 13}, {3}, {2}, {1}, {2}, false},         // dilation
      {{2, 3, 6, 6}, {2}, {}, {0}, {1}, true},             // stride [] = kernel
      {{3, 9, 9}, {3}, {3}, {1}, {1}, true},               // unbatched
      {{1, 1, 1, 1}, {1}, {1}, {0}, {1}, false},
  };
  for (const MaxCase& c : cases)
    for (Layout l : kLayouts) check_max(c, l);
}

TEST(CudaPoolTest, MaxPoolPropagatesNaNLikeCpu) {
  QFLOW_REQUIRE_CUDA();
  Tensor x = from_vector<float>({1, std::nanf(""), 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {1, 1, 4, 4});
  auto [y_c, i_c] = max_pool2d_with_indices(x, {2}, {2});
  auto [y_g, i_g] = max_pool2d_with_indices(x.to(gpu()), {2}, {2});
  const auto yc = to_vector<float>(y_c), yg = to_vector<float>(y_g.cpu());
  ASSERT_EQ(yc.size(), yg.size());
  EXPECT_TRUE(std::isnan(yg[0]));
  for (size_t i = 1; i < yc.size(); ++i) EXPECT_EQ(yg[i], yc[i]);
  EXPECT_EQ(ints(i_g), ints(i_c));
}

TEST(CudaPoolTest, AvgPoolOptions) {
  QFLOW_REQUIRE_CUDA();
  const std::vector<AvgCase> cases = {
      {{128, 512, 4, 4}, {4}, {4}, {0}, false, true, std::nullopt},  // ResNet18-CIFAR's head (avg_pool2d 4)
      {{8, 16, 28, 28}, {2}, {2}, {0}, false, true, std::nullopt},
      {{4, 5, 7, 9}, {3}, {2}, {1}, false, true, std::nullopt},
      {{4, 5, 7, 9}, {3}, {2}, {1}, true, false, std::nullopt},
      {{4, 5, 7, 9}, {3, 2}, {1, 2}, {1, 1}, true, true, std::nullopt},
      {{2, 3, 8, 8}, {3}, {3}, {1}, false, true, 5},
      {{3, 7, 7}, {2}, {}, {0}, true, true, std::nullopt},
  };
  for (const AvgCase& c : cases)
    for (Layout l : kLayouts) check_avg(c, l);
}

TEST(CudaPoolTest, AdaptiveAvgPoolGlobalAndFractionalWindows) {
  QFLOW_REQUIRE_CUDA();
  for (Layout l : kLayouts) {
    check_adaptive({128, 512, 4, 4}, {1, 1}, l);  // ResNet18-CIFAR
    check_adaptive({8, 64, 32, 32}, {1, 1}, l);   // large planes: the warp-per-plane path (NCHW)
    check_adaptive({16, 1280, 7, 7}, {1}, l);     // MobileNetV2
    check_adaptive({4, 3, 10, 7}, {3, 4}, l);     // overlapping fractional windows
    check_adaptive({2, 5, 5, 5}, {7, 6}, l);      // output larger than the input
    check_adaptive({3, 9, 11}, {2, 2}, l);        // unbatched
  }
}

TEST(CudaPoolTest, AutogradThroughMaxAndAdaptivePools) {
  QFLOW_REQUIRE_CUDA();
  Generator gen(51);
  const Tensor x = randn({4, 6, 12, 12}, DType::Float32, &gen);
  Tensor xc = x.clone();
  xc.requires_grad_();
  adaptive_avg_pool2d(max_pool2d(xc, {2}, {2}), {1, 1}).sum().backward();
  Tensor xg = on_gpu(x, Layout::ChannelsLast).detach();
  xg.requires_grad_();
  adaptive_avg_pool2d(max_pool2d(xg, {2}, {2}), {1, 1}).sum().backward();
  EXPECT_LE(relative_error(xg.grad().cpu(), xc.grad()), kAvgTol);
}

TEST(CudaPoolTest, Float64AndUnsupportedDtype) {
  QFLOW_REQUIRE_CUDA();
  Generator gen(61);
  const Tensor x = randn({2, 3, 8, 8}, DType::Float32, &gen).to(DType::Float64);
  EXPECT_EQ(relative_error(max_pool2d(x.to(gpu()), {3}, {2}, {1}).cpu(), max_pool2d(x, {3}, {2}, {1})), 0.0);
  EXPECT_LE(relative_error(avg_pool2d(x.to(gpu()), {3}, {2}, {1}).cpu(), avg_pool2d(x, {3}, {2}, {1})), 1e-12);
  try {
    max_pool2d(zeros({1, 1, 4, 4}, DType::Int64, gpu()), {2});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_pool2d"), std::string::npos) << e.what();
  }
}
