// CUDA batch norm (cuda/kernels/norm.cu) against the CPU kernel (core/kernels/nn/norm.cpp):
// forward in training and eval, the running statistics after the call, the saved statistics,
// native_batch_norm_backward (with and without saved statistics, eval, statistics' gradients,
// no grad_output), the ReLU-fused pair, NCHW / channels-last / non-contiguous inputs on the
// shapes of ResNet18, MobileNetV2 and a BatchNorm1d, determinism, and the dtype error.
//
// Tolerances: the GPU reduces in float (Welford per thread, Chan merges in a fixed tree, the
// per-channel combination in double); the CPU sums runs in float and combines in double. For
// up to ~10^6 elements per channel both stay within ~1e-6 relative of the exact statistics,
// and every output is an O(1)-conditioned function of them, so 1e-4 relative to the largest
// magnitude (relative_error) leaves a wide margin; gradients add one more sum of the same size.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "qflow/qflow.h"

using namespace qflow;
using qflow::testing::Layout;
using qflow::testing::name;
using qflow::testing::gpu;
using qflow::testing_util::relative_error;

namespace {

constexpr double kTol = 1e-4;

// `cpu` on the GPU in the given memory order (logical sizes unchanged).
Tensor on_gpu(const Tensor& cpu, Layout layout) {
  Tensor g = cpu.to(gpu());
  if (cpu.dim() != 4 || layout == Layout::NCHW) return g.contiguous();
  if (layout == Layout::ChannelsLast) {
    Tensor cl = g.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
    EXPECT_TRUE(qflow::testing::is_channels_last(cl)) << ::testing::PrintToString(cl.sizes()) << " strides " << ::testing::PrintToString(cl.strides());
    return cl;
  }
  // Strided: a transposed view of a contiguous (N, C, W, H) tensor.
  return g.transpose(2, 3).contiguous().transpose(2, 3);
}

struct Params {
  Tensor w, b, rm, rv;
};

Params params(int64_t C, Generator& gen) {
  Params p;
  p.w = randn({C}, DType::Float32, &gen) * 0.5 + 1.0;
  p.b = randn({C}, DType::Float32, &gen) * 0.2;
  p.rm = randn({C}, DType::Float32, &gen) * 0.1;
  p.rv = rand({C}, DType::Float32, &gen) + 0.5;
  return p;
}

Params to_gpu(const Params& p) {
  return {p.w.to(gpu()), p.b.to(gpu()), p.rm.clone().to(gpu()), p.rv.clone().to(gpu())};
}

Params clone(const Params& p) { return {p.w, p.b, p.rm.clone(), p.rv.clone()}; }

// Activations with a non-zero mean per channel (like a convolution's output).
Tensor activation(const std::vector<int64_t>& sizes, Generator& gen) {
  Tensor x = randn(sizes, DType::Float32, &gen) * 2.0;
  std::vector<int64_t> bshape(sizes.size(), 1);
  bshape[1] = sizes[1];
  return x + randn(bshape, DType::Float32, &gen);
}

void expect_layout_kept(const Tensor& out, const Tensor& in, Layout layout) {
  if (layout == Layout::ChannelsLast) {
    EXPECT_EQ(out.strides(), in.strides()) << "channels-last output";
  }
}

void check_forward(const std::vector<int64_t>& sizes, Layout layout, bool training, bool relu) {
  SCOPED_TRACE(::testing::Message() << "sizes " << ::testing::PrintToString(sizes) << " " << name(layout)
                                    << (training ? " train" : " eval") << (relu ? " relu" : ""));
  Generator gen(7 + sizes[0] + sizes[1]);
  const Tensor x = activation(sizes, gen);
  const Params pc = params(sizes[1], gen);
  Params cpu = clone(pc);
  Params dev = to_gpu(pc);
  const Tensor xg = on_gpu(x, layout);
  Tensor want = relu ? batch_norm_relu(x, cpu.w, cpu.b, cpu.rm, cpu.rv, training, 0.1, 1e-5)
                     : batch_norm(x, cpu.w, cpu.b, cpu.rm, cpu.rv, training, 0.1, 1e-5);
  Tensor got = relu ? batch_norm_relu(xg, dev.w, dev.b, dev.rm, dev.rv, training, 0.1, 1e-5)
                    : batch_norm(xg, dev.w, dev.b, dev.rm, dev.rv, training, 0.1, 1e-5);
  EXPECT_TRUE(got.is_cuda());
  expect_layout_kept(got, xg, layout);
  EXPECT_LE(relative_error(got.cpu(), want), kTol);
  EXPECT_LE(relative_error(dev.rm.cpu(), cpu.rm), kTol) << "running_mean";
  EXPECT_LE(relative_error(dev.rv.cpu(), cpu.rv), kTol) << "running_var";
}

// native_batch_norm forward + native_batch_norm_backward with the saved statistics and with
// them recomputed (as batch_norm's autograd does), and batch_norm_relu_backward.
void check_backward(const std::vector<int64_t>& sizes, Layout layout, bool training) {
  SCOPED_TRACE(::testing::Message() << "sizes " << ::testing::PrintToString(sizes) << " " << name(layout)
                                    << (training ? " train" : " eval"));
  Generator gen(11 + sizes[0] * 3 + sizes[1]);
  const Tensor x = activation(sizes, gen);
  const Tensor gy = randn(sizes, DType::Float32, &gen);
  const Params pc = params(sizes[1], gen);
  Params cpu = clone(pc);
  Params dev = to_gpu(pc);
  const Tensor xg = on_gpu(x, layout);
  const Tensor gyg = on_gpu(gy, layout);

  auto [y_c, mean_c, invstd_c] = native_batch_norm(x, cpu.w, cpu.b, cpu.rm, cpu.rv, training, 0.1, 1e-5);
  auto [y_g, mean_g, invstd_g] = native_batch_norm(xg, dev.w, dev.b, dev.rm, dev.rv, training, 0.1, 1e-5);
  EXPECT_LE(relative_error(y_g.cpu(), y_c), kTol);
  EXPECT_LE(relative_error(mean_g.cpu(), mean_c), kTol) << "saved mean";
  EXPECT_LE(relative_error(invstd_g.cpu(), invstd_c), kTol) << "saved invstd";
  EXPECT_LE(relative_error(dev.rm.cpu(), cpu.rm), kTol);
  EXPECT_LE(relative_error(dev.rv.cpu(), cpu.rv), kTol);

  auto compare3 = [](const std::tuple<Tensor, Tensor, Tensor>& got, const std::tuple<Tensor, Tensor, Tensor>& want,
                     const std::string& what) {
    EXPECT_LE(relative_error(std::get<0>(got).cpu(), std::get<0>(want)), kTol) << what << ": grad input";
    EXPECT_LE(relative_error(std::get<1>(got).cpu(), std::get<1>(want)), kTol) << what << ": grad weight";
    EXPECT_LE(relative_error(std::get<2>(got).cpu(), std::get<2>(want)), kTol) << what << ": grad bias";
  };
  // Saved statistics.
  compare3(native_batch_norm_backward(gyg, xg, dev.w, dev.rm, dev.rv, mean_g, invstd_g, training, 1e-5),
           native_batch_norm_backward(gy, x, cpu.w, cpu.rm, cpu.rv, mean_c, invstd_c, training, 1e-5), "saved stats");
  // Recomputed statistics (Note [Batch norm saves no statistics]).
  compare3(native_batch_norm_backward(gyg, xg, dev.w, dev.rm, dev.rv, Tensor(), Tensor(), training, 1e-5),
           native_batch_norm_backward(gy, x, cpu.w, cpu.rm, cpu.rv, Tensor(), Tensor(), training, 1e-5),
           "recomputed stats");
  // The ReLU-fused pair.
  const Tensor out_c = batch_norm_relu(x, cpu.w, cpu.b, cpu.rm.clone(), cpu.rv.clone(), training, 0.1, 1e-5);
  const Tensor out_g = batch_norm_relu(xg, dev.w, dev.b, dev.rm.clone(), dev.rv.clone(), training, 0.1, 1e-5);
  EXPECT_LE(relative_error(out_g.cpu(), out_c), kTol) << "batch_norm_relu";
  compare3(batch_norm_relu_backward(gyg, out_g, xg, dev.w, dev.rm, dev.rv, training, 1e-5),
           batch_norm_relu_backward(gy, out_c, x, cpu.w, cpu.rm, cpu.rv, training, 1e-5), "batch_norm_relu_backward");
}

}  // namespace

TEST(CudaBatchNormTest, ForwardTrainAndEvalResNetShapesBothLayouts) {
  QFLOW_REQUIRE_CUDA();
  const std::vector<std::vector<int64_t>> shapes = {
      {128, 64, 32, 32}, {128, 128, 16, 16}, {64, 256, 8, 8}, {8, 512, 4, 4}, {16, 64, 32, 32}};
  for (const auto& s : shapes)
    for (Layout l : {Layout::NCHW, Layout::ChannelsLast})
      for (bool training : {true, false}) check_forward(s, l, training, /*relu=*/false);
}

TEST(CudaBatchNormTest, ForwardMobileNetShapesOddChannelsAndStridedInput) {
  QFLOW_REQUIRE_CUDA();
  // MobileNetV2's channel counts (16 .. 1280, 96/144/960 not powers of 2), odd C and H*W that
  // take the scalar (unvectorised) paths, and a layout that falls back to a contiguous copy.
  const std::vector<std::vector<int64_t>> shapes = {
      {32, 96, 16, 16}, {32, 144, 8, 8}, {16, 960, 4, 4}, {8, 1280, 1, 1}, {4, 3, 7, 7}, {3, 7, 5, 3}, {2, 1, 1, 2}};
  for (const auto& s : shapes) {
    for (Layout l : {Layout::NCHW, Layout::ChannelsLast, Layout::Strided}) {
      check_forward(s, l, true, false);
      check_forward(s, l, false, true);
    }
  }
}

TEST(CudaBatchNormTest, BatchNorm1dAnd3dInputs) {
  QFLOW_REQUIRE_CUDA();
  check_forward({128, 84}, Layout::NCHW, true, false);
  check_forward({128, 84}, Layout::NCHW, false, false);
  check_forward({5, 3}, Layout::NCHW, true, true);
  check_forward({16, 32, 25}, Layout::NCHW, true, false);
  check_backward({128, 84}, Layout::NCHW, true);
  check_backward({16, 32, 25}, Layout::NCHW, true);
}

TEST(CudaBatchNormTest, BackwardMatchesCpuTrainAndEval) {
  QFLOW_REQUIRE_CUDA();
  const std::vector<std::vector<int64_t>> shapes = {{64, 64, 32, 32}, {32, 256, 8, 8}, {8, 512, 4, 4}, {4, 6, 5, 7}};
  for (const auto& s : shapes)
    for (Layout l : {Layout::NCHW, Layout::ChannelsLast, Layout::Strided})
      for (bool training : {true, false}) check_backward(s, l, training);
}

TEST(CudaBatchNormTest, BackwardWithStatisticsGradientsAndNoGradOutput) {
  QFLOW_REQUIRE_CUDA();
  Generator gen(3);
  const std::vector<int64_t> sizes{16, 32, 8, 8};
  const Tensor x = activation(sizes, gen);
  const Params p = params(32, gen);
  const Tensor gmean = randn({32}, DType::Float32, &gen), ginv = randn({32}, DType::Float32, &gen);
  for (Layout l : {Layout::NCHW, Layout::ChannelsLast}) {
    const Tensor xg = on_gpu(x, l);
    auto [y_c, m_c, i_c] = native_batch_norm(x, p.w, p.b, Tensor(), Tensor(), true);
    auto [y_g, m_g, i_g] = native_batch_norm(xg, p.w.to(gpu()), p.b.to(gpu()), Tensor(), Tensor(), true);
    auto want = native_batch_norm_backward(Tensor(), x, p.w, Tensor(), Tensor(), m_c, i_c, true, 1e-5, gmean, ginv);
    auto got = native_batch_norm_backward(Tensor(), xg, p.w.to(gpu()), Tensor(), Tensor(), m_g, i_g, true, 1e-5,
                                          gmean.to(gpu()), ginv.to(gpu()));
    EXPECT_LE(relative_error(std::get<0>(got).cpu(), std::get<0>(want)), kTol) << name(l);
    EXPECT_LE(relative_error(std::get<1>(got).cpu(), std::get<1>(want)), kTol) << name(l);
    EXPECT_LE(relative_error(std::get<2>(got).cpu(), std::get<2>(want)), kTol) << name(l);
  }
}

TEST(CudaBatchNormTest, WithoutAffineOrRunningStatistics) {
  QFLOW_REQUIRE_CUDA();
  Generator gen(5);
  const Tensor x = activation({8, 16, 6, 6}, gen);
  for (Layout l : {Layout::NCHW, Layout::ChannelsLast}) {
    const Tensor got = batch_norm(on_gpu(x, l), Tensor(), Tensor(), Tensor(), Tensor(), true);
    EXPECT_LE(relative_error(got.cpu(), batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true)), kTol) << name(l);
  }
}

TEST(CudaBatchNormTest, AutogradGradientsMatchCpu) {
  QFLOW_REQUIRE_CUDA();
  Generator gen(9);
  const Tensor x = activation({16, 32, 8, 8}, gen);
  const Params p = params(32, gen);
  const Tensor gy = randn({16, 32, 8, 8}, DType::Float32, &gen);
  Tensor xc = x.clone(), wc = p.w.clone(), bc = p.b.clone();
  xc.requires_grad_();
  wc.requires_grad_();
  bc.requires_grad_();
  (batch_norm(xc, wc, bc, p.rm.clone(), p.rv.clone(), true) * gy).sum().backward();
  Tensor xg = on_gpu(x, Layout::ChannelsLast).detach(), wg = p.w.to(gpu()), bg = p.b.to(gpu());
  xg.requires_grad_();
  wg.requires_grad_();
  bg.requires_grad_();
  (batch_norm(xg, wg, bg, p.rm.to(gpu()), p.rv.to(gpu()), true) * on_gpu(gy, Layout::ChannelsLast)).sum().backward();
  EXPECT_LE(relative_error(xg.grad().cpu(), xc.grad()), kTol);
  EXPECT_LE(relative_error(wg.grad().cpu(), wc.grad()), kTol);
  EXPECT_LE(relative_error(bg.grad().cpu(), bc.grad()), kTol);
}

TEST(CudaBatchNormTest, RepeatedRunsAreBitwiseEqual) {
  QFLOW_REQUIRE_CUDA();
  Generator gen(13);
  const Tensor x = activation({64, 128, 16, 16}, gen);
  const Tensor gy = randn({64, 128, 16, 16}, DType::Float32, &gen);
  const Params p = params(128, gen);
  for (Layout l : {Layout::NCHW, Layout::ChannelsLast}) {
    const Tensor xg = on_gpu(x, l), gyg = on_gpu(gy, l);
    const Params d1 = to_gpu(p), d2 = to_gpu(p);
    const Tensor y1 = batch_norm(xg, d1.w, d1.b, d1.rm, d1.rv, true);
    const Tensor y2 = batch_norm(xg, d2.w, d2.b, d2.rm, d2.rv, true);
    EXPECT_EQ(relative_error(y1.cpu(), y2.cpu()), 0.0) << name(l);
    EXPECT_EQ(relative_error(d1.rv.cpu(), d2.rv.cpu()), 0.0) << name(l);
    auto g1 = native_batch_norm_backward(gyg, xg, d1.w, d1.rm, d1.rv, Tensor(), Tensor(), true, 1e-5);
    auto g2 = native_batch_norm_backward(gyg, xg, d1.w, d1.rm, d1.rv, Tensor(), Tensor(), true, 1e-5);
    EXPECT_EQ(relative_error(std::get<0>(g1).cpu(), std::get<0>(g2).cpu()), 0.0) << name(l);
    EXPECT_EQ(relative_error(std::get<1>(g1).cpu(), std::get<1>(g2).cpu()), 0.0) << name(l);
  }
}

TEST(CudaBatchNormTest, Float64MatchesCpu) {
  QFLOW_REQUIRE_CUDA();
  Generator gen(17);
  const Tensor x = activation({8, 12, 5, 5}, gen).to(DType::Float64);
  const Params p = params(12, gen);
  const Tensor w = p.w.to(DType::Float64), b = p.b.to(DType::Float64);
  Tensor rm = p.rm.to(DType::Float64), rv = p.rv.to(DType::Float64);
  Tensor rmg = rm.clone().to(gpu()), rvg = rv.clone().to(gpu());
  const Tensor want = batch_norm(x, w, b, rm, rv, true);
  const Tensor got = batch_norm(x.to(gpu()), w.to(gpu()), b.to(gpu()), rmg, rvg, true);
  EXPECT_LE(relative_error(got.cpu(), want), 1e-12);  // double throughout: rounding only
  EXPECT_LE(relative_error(rvg.cpu(), rv), 1e-12);
}

TEST(CudaBatchNormTest, UnsupportedDtypeNamesOpDeviceAndDtype) {
  QFLOW_REQUIRE_CUDA();
  const Tensor x = zeros({4, 3, 2, 2}, DType::Int32, gpu());
  try {
    batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch_norm"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("int32"), std::string::npos) << e.what();
  }
}
