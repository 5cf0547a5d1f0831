// conv2d, conv2d_relu and conv2d_backward on the GPU (cuDNN, Note [cuDNN convolutions] in
// cuda/kernels/conv_ops.cpp) against the CPU kernels on the same random inputs: ResNet18's and
// MobileNetV2's convolution shapes, grouped and depthwise, with and without bias, padding,
// stride and dilation variants, NCHW-contiguous, channels-last and strided inputs, each
// gradient of conv2d_backward and its output mask, autograd end to end, the filter cache across
// in-place weight updates, and TF32.
//
// Reference and tolerances. The CPU reference runs in float64 on the float32 inputs (im2col +
// OpenBLAS in double: exact to ~1e-15 here), so an error is the GPU's alone. relative_error is
// max |got - want| / max |want|. In strict float32 (TF32 off, what QFLOW_REQUIRE_CUDA sets) an
// output is a sum of K = C/groups kH kW (forward), O kH kW / groups (backward data) or
// N Ho Wo (backward filter) products of randn values: float32 accumulation in cuDNN's blocked
// order errs by ~sqrt(K) eps |term| against outputs of ~sqrt(K) |term|, i.e. ~1e-6 relative;
// cudnnFind may pick Winograd or FFT algorithms, still true float32 arithmetic but with
// transforms that lose one to two more digits (~1e-5 observed for such kernels). kStrictTol =
// 1e-4 leaves margin for those while any layout or indexing bug (errors of O(1)) fails.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "error_of.h"
#include "qflow/qflow.h"

using namespace qflow;
using qflow::testing::channels_last;
using qflow::testing::gpu;
using qflow::testing_util::error_of;
using qflow::testing_util::relative_error;

namespace {

constexpr double kStrictTol = 1e-4;
// TF32 rounds each factor to 10 explicit mantissa bits (relative error up to 2^-11 ≈ 4.9e-4),
// so each product errs by up to ~1e-3 relative; the errors of the K products are independent
// and partly cancel, and accumulation stays float32, so the output error normalised by the
// largest output stays around 1e-3 at worst (~4e-4 expected for randn data). 2e-3 accepts
// TF32 and still fails a wrong result by orders of magnitude.
constexpr double kTf32Tol = 2e-3;
constexpr double kFloat64Tol = 1e-10;

struct ConvCase {
  std::string name;
  IntList x, w;
  IntList stride, padding, dilation;
  int64_t groups;
};

// ResNet18 (CIFAR layout: 3x3 stem; and the ImageNet 7x7 stride-2 stem), batch 4.
std::vector<ConvCase> resnet18_cases() {
  return {
      {"stem 3->64 3x3", {4, 3, 32, 32}, {64, 3, 3, 3}, {1}, {1}, {1}, 1},
      {"imagenet stem 3->64 7x7 s2", {2, 3, 40, 40}, {64, 3, 7, 7}, {2}, {3}, {1}, 1},
      {"layer1 64->64 3x3", {4, 64, 16, 16}, {64, 64, 3, 3}, {1}, {1}, {1}, 1},
      {"layer2 64->128 3x3 s2", {4, 64, 16, 16}, {128, 64, 3, 3}, {2}, {1}, {1}, 1},
      {"layer2 downsample 64->128 1x1 s2", {4, 64, 16, 16}, {128, 64, 1, 1}, {2}, {0}, {1}, 1},
      {"layer3 128->256 3x3 s2", {4, 128, 8, 8}, {256, 128, 3, 3}, {2}, {1}, {1}, 1},
      {"layer4 256->512 3x3 s2", {2, 256, 8, 8}, {512, 256, 3, 3}, {2}, {1}, {1}, 1},
      {"layer4 512->512 3x3", {2, 512, 4, 4}, {512, 512, 3, 3}, {1}, {1}, {1}, 1},
  };
}

// MobileNetV2: pointwise expand/project, depthwise 3x3 stride 1 and 2; plus grouped convs.
std::vector<ConvCase> grouped_cases() {
  return {
      {"mbv2 pointwise 16->96", {2, 16, 16, 16}, {96, 16, 1, 1}, {1}, {0}, {1}, 1},
      {"mbv2 depthwise 96 3x3 s2", {2, 96, 16, 16}, {96, 1, 3, 3}, {2}, {1}, {1}, 96},
      {"mbv2 depthwise 144 3x3 s1", {2, 144, 8, 8}, {144, 1, 3, 3}, {1}, {1}, {1}, 144},
      {"mbv2 project 144->24", {2, 144, 8, 8}, {24, 144, 1, 1}, {1}, {0}, {1}, 1},
      {"depthwise multiplier 2", {2, 8, 9, 9}, {16, 1, 3, 3}, {1}, {1}, {1}, 8},
      {"grouped 16->32 g4 3x3", {2, 16, 10, 10}, {32, 4, 3, 3}, {1}, {1}, {1}, 4},
      {"grouped 12->6 g3 5x5 s2", {3, 12, 11, 11}, {6, 4, 5, 5}, {2}, {2}, {1}, 3},
  };
}

// Padding, stride and dilation variants, odd and tiny sizes.
std::vector<ConvCase> variant_cases() {
  return {
      {"no padding 3x3", {2, 5, 7, 7}, {7, 5, 3, 3}, {1}, {0}, {1}, 1},
      {"dilation 2", {2, 6, 13, 13}, {4, 6, 3, 3}, {1}, {2}, {2}, 1},
      {"dilation (2, 3) stride (2, 1)", {1, 4, 15, 17}, {5, 4, 3, 3}, {2, 1}, {1, 3}, {2, 3}, 1},
      {"rectangular 5x3 stride (1, 2) padding (0, 1)", {3, 3, 9, 11}, {8, 3, 5, 3}, {1, 2}, {0, 1}, {1}, 1},
      {"single image, single channel", {1, 1, 28, 28}, {6, 1, 5, 5}, {1}, {2}, {1}, 1},
      {"1x1 output", {2, 7, 3, 3}, {5, 7, 3, 3}, {1}, {0}, {1}, 1},
      {"large padding", {2, 3, 4, 4}, {3, 3, 3, 3}, {3}, {3}, {1}, 1},
  };
}

std::vector<ConvCase> all_cases() {
  std::vector<ConvCase> r = resnet18_cases();
  for (auto& c : grouped_cases()) r.push_back(c);
  for (auto& c : variant_cases()) r.push_back(c);
  return r;
}

Tensor f64(const Tensor& t) { return t.to(DType::Float64); }

bool has_channels_last_strides(const Tensor& t) {
  if (t.dim() != 4) return false;
  const auto& s = t.sizes();
  const std::vector<int64_t> want{s[1] * s[2] * s[3], 1, s[3] * s[1], s[1]};
  for (int d = 0; d < 4; ++d)
    if (s[d] != 1 && t.strides()[d] != want[d]) return false;
  return true;
}

enum class Layout { Nchw, ChannelsLast, Strided };

const char* to_string(Layout l) {
  switch (l) {
    case Layout::Nchw: return "NCHW";
    case Layout::ChannelsLast: return "channels-last";
    case Layout::Strided: return "strided";
  }
  return "?";
}

// x (CPU) on the GPU in the given layout, same values.
Tensor on_gpu(const Tensor& x, Layout layout) {
  switch (layout) {
    case Layout::Nchw: return x.to(gpu());
    case Layout::ChannelsLast: return channels_last(x.to(gpu()));
    case Layout::Strided: {
      // Every other column of a tensor twice as wide: neither contiguous nor channels-last.
      std::vector<int64_t> wide = x.sizes();
      wide.back() *= 2;
      Tensor big = zeros(wide, x.dtype(), gpu());
      Tensor view = big.slice(x.dim() - 1, 0, wide.back(), 2);
      view.copy_(x.to(gpu()));
      return view;
    }
  }
  return Tensor();
}

struct Data {
  Tensor x, w, b;  // CPU float32
};

Data make_data(const ConvCase& c, uint64_t seed, DType dtype = DType::Float32) {
  Generator gen(seed);
  Data d;
  d.x = randn(c.x, dtype, &gen);
  d.w = randn(c.w, dtype, &gen);
  d.b = randn({c.w[0]}, dtype, &gen);
  return d;
}

std::optional<Tensor> maybe(bool use, const Tensor& t) { return use ? std::optional<Tensor>(t) : std::nullopt; }

// conv2d / conv2d_relu on the GPU against the CPU in float64.
void check_forward(const ConvCase& c, bool bias, Layout layout, bool relu, double tol = kStrictTol) {
  SCOPED_TRACE(c.name + (bias ? ", bias, " : ", no bias, ") + to_string(layout) + (relu ? ", conv2d_relu" : ""));
  const Data d = make_data(c, 7);
  const auto fn = relu ? &conv2d_relu : &conv2d;
  const Tensor want = fn(f64(d.x), f64(d.w), maybe(bias, f64(d.b)), c.stride, c.padding, c.dilation, c.groups);
  const Tensor got =
      fn(on_gpu(d.x, layout), d.w.to(gpu()), maybe(bias, d.b.to(gpu())), c.stride, c.padding, c.dilation, c.groups);
  EXPECT_EQ(got.device(), gpu());
  EXPECT_EQ(got.dtype(), DType::Float32);
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_TRUE(has_channels_last_strides(got)) << "a float32 conv output is channels-last, got strides "
                                              << fmt::format("{}", got.strides());
  EXPECT_LE(relative_error(got.cpu(), want), tol);
}

// Each gradient of conv2d_backward on the GPU against the CPU op in float64.
void check_backward(const ConvCase& c, Layout layout, double tol = kStrictTol) {
  SCOPED_TRACE(c.name + ", " + to_string(layout));
  const Data d = make_data(c, 11);
  const Tensor y = conv2d(f64(d.x), f64(d.w), std::nullopt, c.stride, c.padding, c.dilation, c.groups);
  Generator gen(13);
  const Tensor gy = randn(y.sizes(), DType::Float32, &gen);
  const auto [rx, rw, rb] = conv2d_backward(f64(gy), f64(d.x), f64(d.w), c.stride, c.padding, c.dilation, c.groups);
  const auto [gx, gw, gb] =
      conv2d_backward(on_gpu(gy, layout), on_gpu(d.x, layout), d.w.to(gpu()), c.stride, c.padding, c.dilation, c.groups);
  ASSERT_TRUE(gx.defined() && gw.defined() && gb.defined());
  EXPECT_EQ(gx.sizes(), d.x.sizes());
  EXPECT_EQ(gw.sizes(), d.w.sizes());
  EXPECT_TRUE(gw.is_contiguous()) << "the weight gradient comes back OIHW-contiguous like the parameter";
  EXPECT_LE(relative_error(gx.cpu(), rx), tol) << "grad_input";
  EXPECT_LE(relative_error(gw.cpu(), rw), tol) << "grad_weight";
  EXPECT_LE(relative_error(gb.cpu(), rb), tol) << "grad_bias";
}

/// Restores strict float32 however the test ends.
struct Tf32Guard {
  explicit Tf32Guard(bool allow) { set_allow_tf32(allow); }
  ~Tf32Guard() { set_allow_tf32(false); }
};

}  // namespace

TEST(CudaConvTest, ResNet18ShapesForward) {
  QFLOW_REQUIRE_CUDA();
  for (const ConvCase& c : resnet18_cases())
    for (Layout layout : {Layout::Nchw, Layout::ChannelsLast}) {
      check_forward(c, false, layout, false);
      check_forward(c, true, layout, false);
    }
}

TEST(CudaConvTest, GroupedAndDepthwiseForward) {
  QFLOW_REQUIRE_CUDA();
  for (const ConvCase& c : grouped_cases())
    for (Layout layout : {Layout::Nchw, Layout::ChannelsLast}) {
      check_forward(c, false, layout, false);
      check_forward(c, true, layout, false);
    }
}

TEST(CudaConvTest, PaddingStrideDilationVariantsForward) {
  QFLOW_REQUIRE_CUDA();
  for (const ConvCase& c : variant_cases())
    for (Layout layout : {Layout::Nchw, Layout::ChannelsLast, Layout::Strided}) check_forward(c, true, layout, false);
}

TEST(CudaConvTest, Conv2dReluMatchesCpu) {
  QFLOW_REQUIRE_CUDA();
  for (const ConvCase& c : all_cases()) {
    check_forward(c, true, Layout::ChannelsLast, true);
    check_forward(c, false, Layout::Nchw, true);
  }
}

TEST(CudaConvTest, BackwardEveryGradientMatchesCpu) {
  QFLOW_REQUIRE_CUDA();
  for (const ConvCase& c : all_cases())
    for (Layout layout : {Layout::Nchw, Layout::ChannelsLast}) check_backward(c, layout);
}

TEST(CudaConvTest, BackwardOfStridedTensors) {
  QFLOW_REQUIRE_CUDA();
  for (const ConvCase& c : variant_cases()) check_backward(c, Layout::Strided);
}

TEST(CudaConvTest, BackwardComputesOnlyTheRequestedGradients) {
  QFLOW_REQUIRE_CUDA();
  const ConvCase c{"3x3 with bias", {2, 8, 9, 9}, {16, 8, 3, 3}, {1}, {1}, {1}, 1};
  const Data d = make_data(c, 17);
  Generator gen(19);
  const Tensor gy = randn({2, 16, 9, 9}, DType::Float32, &gen);
  const auto [rx, rw, rb] = conv2d_backward(f64(gy), f64(d.x), f64(d.w), c.stride, c.padding, c.dilation, c.groups);
  const Tensor gy_g = channels_last(gy.to(gpu())), x_g = channels_last(d.x.to(gpu())), w_g = d.w.to(gpu());
  for (int mask = 0; mask < 8; ++mask) {
    const bool want_x = mask & 1, want_w = mask & 2, want_b = mask & 4;
    SCOPED_TRACE(fmt::format("input_grad={} weight_grad={} bias_grad={}", want_x, want_w, want_b));
    const auto [gx, gw, gb] =
        conv2d_backward(gy_g, x_g, w_g, c.stride, c.padding, c.dilation, c.groups, want_x, want_w, want_b);
    EXPECT_EQ(gx.defined(), want_x);
    EXPECT_EQ(gw.defined(), want_w);
    EXPECT_EQ(gb.defined(), want_b);
    if (want_x) {
      EXPECT_LE(relative_error(gx.cpu(), rx), kStrictTol);
    }
    if (want_w) {
      EXPECT_LE(relative_error(gw.cpu(), rw), kStrictTol);
    }
    if (want_b) {
      EXPECT_LE(relative_error(gb.cpu(), rb), kStrictTol);
    }
  }
  // The bias gradient alone, from an NCHW-contiguous grad_output (read in that layout).
  const auto [nx, nw, nb] =
      conv2d_backward(gy.to(gpu()), x_g, w_g, c.stride, c.padding, c.dilation, c.groups, false, false, true);
  EXPECT_LE(relative_error(nb.cpu(), rb), kStrictTol);
}

TEST(CudaConvTest, AutogradGradientsMatchCpu) {
  QFLOW_REQUIRE_CUDA();
  for (const ConvCase& c : {resnet18_cases()[2], grouped_cases()[1], variant_cases()[2]}) {
    for (bool relu : {false, true}) {
      SCOPED_TRACE(c.name + (relu ? ", conv2d_relu" : ", conv2d"));
      const Data d = make_data(c, 23);
      const auto fn = relu ? &conv2d_relu : &conv2d;
      // CPU in float64.
      Tensor xc = f64(d.x).requires_grad_(), wc = f64(d.w).requires_grad_(), bc = f64(d.b).requires_grad_();
      const Tensor yc = fn(xc, wc, bc, c.stride, c.padding, c.dilation, c.groups);
      Generator gen(29);
      const Tensor gy = randn(yc.sizes(), DType::Float32, &gen);
      yc.backward(f64(gy));
      // GPU, channels-last input.
      Tensor xg = channels_last(d.x.to(gpu())).requires_grad_();
      Tensor wg = d.w.to(gpu()).requires_grad_();
      Tensor bg = d.b.to(gpu()).requires_grad_();
      const Tensor yg = fn(xg, wg, bg, c.stride, c.padding, c.dilation, c.groups);
      EXPECT_LE(relative_error(yg.cpu(), yc.detach()), kStrictTol);
      yg.backward(gy.to(gpu()));
      ASSERT_TRUE(xg.grad().defined() && wg.grad().defined() && bg.grad().defined());
      EXPECT_EQ(xg.grad().device(), gpu());
      EXPECT_LE(relative_error(xg.grad().cpu(), xc.grad()), kStrictTol) << "input";
      EXPECT_LE(relative_error(wg.grad().cpu(), wc.grad()), kStrictTol) << "weight";
      EXPECT_LE(relative_error(bg.grad().cpu(), bc.grad()), kStrictTol) << "bias";
    }
  }
}

TEST(CudaConvTest, UnbatchedInput) {
  QFLOW_REQUIRE_CUDA();
  const ConvCase c{"unbatched", {6, 10, 10}, {4, 6, 3, 3}, {1}, {1}, {1}, 1};
  const Data d = make_data(c, 31);
  const Tensor want = conv2d(f64(d.x), f64(d.w), f64(d.b), c.stride, c.padding, c.dilation, c.groups);
  const Tensor got = conv2d(d.x.to(gpu()), d.w.to(gpu()), d.b.to(gpu()), c.stride, c.padding, c.dilation, c.groups);
  ASSERT_EQ(got.sizes(), (std::vector<int64_t>{4, 10, 10}));
  EXPECT_LE(relative_error(got.cpu(), want), kStrictTol);
  Generator gen(37);
  const Tensor gy = randn({4, 10, 10}, DType::Float32, &gen);
  const auto [rx, rw, rb] = conv2d_backward(f64(gy), f64(d.x), f64(d.w), c.stride, c.padding, c.dilation, c.groups);
  const auto [gx, gw, gb] =
      conv2d_backward(gy.to(gpu()), d.x.to(gpu()), d.w.to(gpu()), c.stride, c.padding, c.dilation, c.groups);
  ASSERT_EQ(gx.sizes(), d.x.sizes());
  EXPECT_LE(relative_error(gx.cpu(), rx), kStrictTol);
  EXPECT_LE(relative_error(gw.cpu(), rw), kStrictTol);
  EXPECT_LE(relative_error(gb.cpu(), rb), kStrictTol);
}

TEST(CudaConvTest, EmptyBatch) {
  QFLOW_REQUIRE_CUDA();
  const Tensor x = zeros({0, 3, 8, 8}, DType::Float32, gpu());
  const Tensor w = ones({5, 3, 3, 3}, DType::Float32, gpu());
  const Tensor b = ones({5}, DType::Float32, gpu());
  const Tensor y = conv2d(x, w, b, {1}, {1});
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{0, 5, 8, 8}));
  const auto [gx, gw, gb] = conv2d_backward(zeros({0, 5, 8, 8}, DType::Float32, gpu()), x, w, {1}, {1}, {1}, 1);
  EXPECT_EQ(gx.sizes(), (std::vector<int64_t>{0, 3, 8, 8}));
  EXPECT_EQ(to_vector<float>(gw.cpu()), std::vector<float>(5 * 3 * 3 * 3, 0.0f));
  EXPECT_EQ(to_vector<float>(gb.cpu()), std::vector<float>(5, 0.0f));
}

TEST(CudaConvTest, NonContiguousWeight) {
  QFLOW_REQUIRE_CUDA();
  Generator gen(41);
  const Tensor x = randn({2, 6, 9, 9}, DType::Float32, &gen);
  const Tensor w_io = randn({6, 10, 3, 3}, DType::Float32, &gen);  // (C, O, kH, kW), used transposed
  const Tensor want = conv2d(f64(x), f64(w_io).transpose(0, 1), std::nullopt, {1}, {1});
  const Tensor w_g = w_io.to(gpu()).transpose(0, 1);
  ASSERT_FALSE(w_g.is_contiguous());
  EXPECT_LE(relative_error(conv2d(x.to(gpu()), w_g, std::nullopt, {1}, {1}).cpu(), want), kStrictTol);
  // A channels-last weight is read in place.
  EXPECT_LE(relative_error(conv2d(x.to(gpu()), channels_last(w_g), std::nullopt, {1}, {1}).cpu(), want), kStrictTol);
}

TEST(CudaConvTest, InPlaceWeightUpdateIsSeen) {
  // The channels-last copy of a weight is cached per storage version: an in-place update of the
  // weight must make the next convolution use the new values.
  QFLOW_REQUIRE_CUDA();
  const ConvCase c{"3x3", {2, 16, 8, 8}, {32, 16, 3, 3}, {1}, {1}, {1}, 1};
  const Data d = make_data(c, 43);
  const Tensor x_g = channels_last(d.x.to(gpu()));
  Tensor w_g = d.w.to(gpu());
  const Tensor want1 = conv2d(f64(d.x), f64(d.w), std::nullopt, c.stride, c.padding);
  for (int repeat = 0; repeat < 2; ++repeat)  // the second call reuses the cached copy
    EXPECT_LE(relative_error(conv2d(x_g, w_g, std::nullopt, c.stride, c.padding).cpu(), want1), kStrictTol);
  Generator gen(47);
  const Tensor w2 = randn(c.w, DType::Float32, &gen);
  w_g.copy_(w2.to(gpu()));
  const Tensor want2 = conv2d(f64(d.x), f64(w2), std::nullopt, c.stride, c.padding);
  EXPECT_LE(relative_error(conv2d(x_g, w_g, std::nullopt, c.stride, c.padding).cpu(), want2), kStrictTol);
  // Backward data reads the weight too.
  Generator gen2(53);
  const Tensor gy = randn({2, 32, 8, 8}, DType::Float32, &gen2);
  const auto [rx, rw, rb] = conv2d_backward(f64(gy), f64(d.x), f64(w2), c.stride, c.padding, c.dilation, c.groups);
  const auto [gx, gw, gb] =
      conv2d_backward(channels_last(gy.to(gpu())), x_g, w_g, c.stride, c.padding, c.dilation, c.groups);
  EXPECT_LE(relative_error(gx.cpu(), rx), kStrictTol);
}

TEST(CudaConvTest, Float64) {
  QFLOW_REQUIRE_CUDA();
  for (const ConvCase& c : {resnet18_cases()[2], grouped_cases()[1], grouped_cases()[5], variant_cases()[2]}) {
    SCOPED_TRACE(c.name);
    const Data d = make_data(c, 59, DType::Float64);
    const Tensor want = conv2d(d.x, d.w, d.b, c.stride, c.padding, c.dilation, c.groups);
    const Tensor got = conv2d(d.x.to(gpu()), d.w.to(gpu()), d.b.to(gpu()), c.stride, c.padding, c.dilation, c.groups);
    EXPECT_EQ(got.dtype(), DType::Float64);
    EXPECT_LE(relative_error(got.cpu(), want), kFloat64Tol);
    Generator gen(61);
    const Tensor gy = randn(want.sizes(), DType::Float64, &gen);
    const auto [rx, rw, rb] = conv2d_backward(gy, d.x, d.w, c.stride, c.padding, c.dilation, c.groups);
    const auto [gx, gw, gb] =
        conv2d_backward(gy.to(gpu()), d.x.to(gpu()), d.w.to(gpu()), c.stride, c.padding, c.dilation, c.groups);
    EXPECT_LE(relative_error(gx.cpu(), rx), kFloat64Tol);
    EXPECT_LE(relative_error(gw.cpu(), rw), kFloat64Tol);
    EXPECT_LE(relative_error(gb.cpu(), rb), kFloat64Tol);
  }
}

TEST(CudaConvTest, Tf32StaysWithinTf32Tolerance) {
  QFLOW_REQUIRE_CUDA();
  Tf32Guard tf32(true);
  for (const ConvCase& c : {resnet18_cases()[0], resnet18_cases()[2], resnet18_cases()[4], resnet18_cases()[7]}) {
    check_forward(c, true, Layout::ChannelsLast, false, kTf32Tol);
    check_backward(c, Layout::ChannelsLast, kTf32Tol);
  }
}

TEST(CudaConvTest, ErrorsNameTheOpAndShapes) {
  QFLOW_REQUIRE_CUDA();
  const Tensor x = zeros({1, 3, 5, 5}, DType::Float32, gpu());
  const Tensor w = zeros({8, 4, 3, 3}, DType::Float32, gpu());
  std::string e = error_of([&] { conv2d(x, w); });
  EXPECT_NE(e.find("conv2d"), std::string::npos) << e;
  EXPECT_NE(e.find("[1, 3, 5, 5]"), std::string::npos) << e;
  e = error_of([&] { conv2d(x, zeros({8, 3, 7, 7}, DType::Float32, gpu())); });
  EXPECT_NE(e.find("larger than the padded input"), std::string::npos) << e;
  e = error_of([&] { conv2d(x, zeros({8, 3, 3, 3}, DType::Float32, gpu()), zeros({7}, DType::Float32, gpu())); });
  EXPECT_NE(e.find("expected bias of shape [8]"), std::string::npos) << e;
  e = error_of([&] {
    conv2d_backward(zeros({1, 8, 4, 4}, DType::Float32, gpu()), x, zeros({8, 3, 3, 3}, DType::Float32, gpu()), {1},
                    {0}, {1}, 1);
  });
  EXPECT_NE(e.find("conv2d_backward: expected grad_output of shape [1, 8, 3, 3]"), std::string::npos) << e;
}
