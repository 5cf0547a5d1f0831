// CUDA reductions against the CPU kernels on the same random inputs: sum, mean, var, std,
// logsumexp, sum_to, mul_sum_to, max/min (all and dim), argmax/argmin, amax/amin and
// value_selecting_reduction_backward, over contiguous, transposed and channels-last inputs,
// both reduction schedules (rows and columns, Note [CUDA reductions]), split reductions
// (1000003 elements, a channels-last (128, 64, 32, 32) batch to per-channel sums), keepdim,
// negative dims, empty and 0-d inputs, ties and NaN.
//
// Tolerances (relative_error: max |got - want| / max |want|). The CPU accumulates float in
// double; the GPU accumulates float in float, each thread over a few dozen elements and then
// in a tree, so the rounding error of a sum of n terms grows like 2^-24 * log2(n) * sum |x|
// in the worst case and like 2^-24 * sqrt(n) * rms(x) typically: against a result of size
// sqrt(n) * rms(x) (random signs) that is ~1e-7 typical; 1e-5 leaves margin for the worst
// case at these sizes. Welford's variance in float loses a further few ulps per combination:
// 1e-5, and 1e-4 for data offset far from zero (mean 100, deviation 0.1). Selections (max,
// min, indices, the scatter of their gradient) are exact.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "qflow/qflow.h"

using namespace qflow;
using namespace qflow::testing;
using qflow::testing_util::relative_error;

namespace {

constexpr double kExact = 0.0;
constexpr double kSum = 1e-5;

Tensor on_gpu(const Tensor& t) { return t.to(qflow::testing::gpu()); }

Tensor same(const Tensor& t) { return t; }

struct DimsCase {
  std::string name;
  Tensor x;
  std::function<Tensor(const Tensor&)> layout;
  IntList dims;
  bool keepdim;
};

std::vector<DimsCase> dims_cases() {
  const Tensor big = randn_cpu({1000003}, 1);
  const Tensor nchw = randn_cpu({4, 6, 5, 5}, 2);
  const Tensor mat = randn_cpu({33, 17}, 3);
  const Tensor wide = randn_cpu({128, 1000}, 4);
  const Tensor four = randn_cpu({2, 3, 5, 7}, 5);
  auto t = [](const Tensor& x) { return x.t(); };
  return {
      {"1000003, all", big, same, {}, false},
      {"7, all", randn_cpu({7}, 6), same, {}, false},
      {"one element", randn_cpu({1}, 7), same, {0}, true},
      {"0-d", randn_cpu({}, 8), same, {}, false},
      {"nchw per channel", nchw, same, {0, 2, 3}, true},
      {"channels-last per channel", nchw, channels_last, {0, 2, 3}, true},
      {"channels-last over H, W", nchw, channels_last, {2, 3}, false},
      {"channels-last over C", nchw, channels_last, {1}, false},
      {"transposed dim 0", mat, t, {0}, false},
      {"transposed dim -1 keepdim", mat, t, {-1}, true},
      {"rows (128, 1000) dim 1", wide, same, {1}, false},
      {"columns (128, 1000) dim 0", wide, same, {0}, false},
      {"(2,3,5,7) dims 1, 3", four, same, {1, 3}, false},
      {"(2,3,5,7) dims 0, 2 keepdim", four, same, {0, 2}, true},
  };
}

}  // namespace

TEST(CudaReduceTest, SumAndMeanMatchCpu) {
  QFLOW_REQUIRE_CUDA();
  for (const DimsCase& c : dims_cases()) {
    const Tensor g = c.layout(on_gpu(c.x));
    const Tensor x = c.layout(c.x);
    expect_match(sum(g, c.dims, c.keepdim), sum(x, c.dims, c.keepdim), kSum, "sum " + c.name);
    expect_match(mean(g, c.dims, c.keepdim), mean(x, c.dims, c.keepdim), kSum, "mean " + c.name);
  }
  const Tensor f64 = randn_cpu({1000003}, 10, DType::Float64);
  expect_match(sum(on_gpu(f64)), sum(f64), 1e-12, "sum float64");
  // Integer and bool sums are int64 and exact.
  Generator gen(11);
  const Tensor xi = randint(-1000, 1000, {513, 77}, DType::Int32, &gen);
  expect_match(sum(on_gpu(xi)), sum(xi), kExact, "sum int32 is int64");
  expect_match(sum(on_gpu(xi), {0}), sum(xi, {0}), kExact, "sum int32 dim 0");
  const Tensor b = gt(randn_cpu({1000003}, 12), 0.0);
  expect_match(sum(on_gpu(b)), sum(b), kExact, "sum bool");
  // Empty reductions: sum 0, mean NaN.
  const Tensor e = on_gpu(zeros({0, 3}));
  expect_match(sum(e, {0}), zeros({3}), kExact, "sum over an empty dim");
  for (float v : to_vector<float>(mean(e, {0}))) EXPECT_TRUE(std::isnan(v));
}

TEST(CudaReduceTest, SplitReductionsOfLargeBatches) {
  QFLOW_REQUIRE_CUDA();
  // A batch-norm-sized activation: per-channel sums of 131072 elements, channels-last (columns)
  // and row-major (rows over (N, H*W)), both split across blocks.
  const Tensor x = randn_cpu({128, 64, 32, 32}, 20);
  const Tensor g = on_gpu(x);
  const Tensor want = sum(x, {0, 2, 3}, true);
  expect_match(sum(channels_last(g), {0, 2, 3}, true), want, kSum, "channels-last per-channel sum");
  expect_match(sum(g, {0, 2, 3}, true), want, kSum, "row-major per-channel sum");
  expect_match(sum_to(channels_last(g), {1, 64, 1, 1}), sum_to(x, {1, 64, 1, 1}), kSum, "sum_to channels-last");
  expect_match(var(channels_last(g), {0, 2, 3}, false, false), var(x, {0, 2, 3}, false, false), kSum,
               "per-channel variance");
}

TEST(CudaReduceTest, VarAndStdMatchCpu) {
  QFLOW_REQUIRE_CUDA();
  for (const DimsCase& c : dims_cases()) {
    if (c.name == "0-d" || c.name == "one element") continue;  // n - 1 = 0: inf/NaN on both
    const Tensor g = c.layout(on_gpu(c.x));
    const Tensor x = c.layout(c.x);
    for (bool unbiased : {true, false}) {
      const std::string tag = c.name + (unbiased ? " unbiased" : " biased");
      expect_match(var(g, c.dims, unbiased, c.keepdim), var(x, c.dims, unbiased, c.keepdim), kSum, "var " + tag);
      expect_match(qflow::std(g, c.dims, unbiased, c.keepdim), qflow::std(x, c.dims, unbiased, c.keepdim), kSum,
                   "std " + tag);
    }
  }
  // Far from zero: Welford keeps the deviations' precision.
  const Tensor off = add(mul(randn_cpu({1000003}, 30), 0.1), 100.0);
  expect_match(var(on_gpu(off)), var(off), 1e-4, "var of offset data");
  const Tensor rows = add(mul(randn_cpu({64, 4099}, 31), 0.1), 100.0);
  expect_match(var(on_gpu(rows), {1}), var(rows, {1}), 1e-4, "row variances of offset data");
  const Tensor f64 = randn_cpu({3, 1001}, 32, DType::Float64);
  expect_match(var(on_gpu(f64), {1}), var(f64, {1}), 1e-12, "var float64");
}

TEST(CudaReduceTest, LogSumExpMatchesCpu) {
  QFLOW_REQUIRE_CUDA();
  const Tensor x = mul(randn_cpu({64, 1000}, 40), 5.0);
  expect_match(logsumexp(on_gpu(x), {1}), logsumexp(x, {1}), kSum, "logsumexp rows");
  expect_match(logsumexp(on_gpu(x), {0}, true), logsumexp(x, {0}, true), kSum, "logsumexp columns keepdim");
  const Tensor y = randn_cpu({3, 7, 9, 4}, 41);
  expect_match(logsumexp(channels_last(on_gpu(y)), {1, 3}), logsumexp(y, {1, 3}), kSum, "logsumexp channels-last");
  expect_match(logsumexp(on_gpu(randn_cpu({1000003}, 42)), {0}), logsumexp(randn_cpu({1000003}, 42), {0}), kSum,
               "logsumexp 1000003");
  Generator gen(43);
  const Tensor xi = randint(-5, 5, {4, 6}, DType::Int64, &gen);
  expect_match(logsumexp(on_gpu(xi), {1}), logsumexp(xi, {1}), kSum, "logsumexp int64 is float32");
  // -inf rows give -inf, a +inf element gives +inf, a NaN gives NaN (the CPU's rules).
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor special = from_vector<float>({-inf, -inf, -inf, 1.0f, inf, 2.0f, 0.0f, std::nanf(""), 3.0f}, {3, 3});
  const auto got = to_vector<float>(logsumexp(on_gpu(special), {1}));
  EXPECT_EQ(got[0], -inf);
  EXPECT_EQ(got[1], inf);
  EXPECT_TRUE(std::isnan(got[2]));
}

TEST(CudaReduceTest, MaxMinAndArgReductionsMatchCpu) {
  QFLOW_REQUIRE_CUDA();
  for (const DimsCase& c : dims_cases()) {
    const Tensor g = c.layout(on_gpu(c.x));
    const Tensor x = c.layout(c.x);
    expect_match(amax(g, c.dims, c.keepdim), amax(x, c.dims, c.keepdim), kExact, "amax " + c.name);
    expect_match(amin(g, c.dims, c.keepdim), amin(x, c.dims, c.keepdim), kExact, "amin " + c.name);
    if (c.dims.size() == 1) {
      const auto [gv, gi] = max(g, c.dims[0], c.keepdim);
      const auto [wv, wi] = max(x, c.dims[0], c.keepdim);
      expect_match(gv, wv, kExact, "max.dim values " + c.name);
      expect_match(gi, wi, kExact, "max.dim indices " + c.name);
      const auto [hv, hi] = min(g, c.dims[0], c.keepdim);
      const auto [uv, ui] = min(x, c.dims[0], c.keepdim);
      expect_match(hv, uv, kExact, "min.dim values " + c.name);
      expect_match(hi, ui, kExact, "min.dim indices " + c.name);
      expect_match(argmax(g, c.dims[0], c.keepdim), argmax(x, c.dims[0], c.keepdim), kExact, "argmax " + c.name);
      expect_match(argmin(g, c.dims[0], c.keepdim), argmin(x, c.dims[0], c.keepdim), kExact, "argmin " + c.name);
    }
    expect_match(max(g), max(x), kExact, "max.all " + c.name);
    expect_match(min(g), min(x), kExact, "min.all " + c.name);
    expect_match(argmax(g), argmax(x), kExact, "argmax flat " + c.name);
    expect_match(argmin(g, std::nullopt, true), argmin(x, std::nullopt, true), kExact, "argmin flat keepdim " + c.name);
  }
  // Ties report the first position, across threads and split blocks.
  Generator gen(50);
  const Tensor ties = randint(0, 3, {1000003}, DType::Float32, &gen);
  expect_match(argmax(on_gpu(ties)), argmax(ties), kExact, "argmax with ties");
  const Tensor tie_rows = randint(0, 2, {300, 517}, DType::Int64, &gen);
  expect_match(argmin(on_gpu(tie_rows), 1), argmin(tie_rows, 1), kExact, "argmin rows with ties");
  expect_match(argmax(on_gpu(tie_rows), 0), argmax(tie_rows, 0), kExact, "argmax columns with ties");
  expect_match(amax(on_gpu(tie_rows), {0}), amax(tie_rows, {0}), kExact, "amax int64");
  const Tensor u8 = randint(0, 255, {999}, DType::UInt8, &gen);
  expect_match(max(on_gpu(u8)), max(u8), kExact, "max uint8");
  const Tensor bools = gt(randn_cpu({77}, 51), 1.0);
  expect_match(argmax(on_gpu(bools)), argmax(bools), kExact, "argmax bool");
  // NaN beats every number; the first NaN is reported.
  const float nan = std::nanf("");
  const Tensor withnan = from_vector<float>({1.0f, nan, 5.0f, nan, -2.0f, 0.0f}, {2, 3});
  EXPECT_EQ(to_vector<int64_t>(argmax(on_gpu(withnan))), std::vector<int64_t>{1});
  EXPECT_EQ(to_vector<int64_t>(argmin(on_gpu(withnan), 1)), to_vector<int64_t>(argmin(withnan, 1)));
  EXPECT_TRUE(std::isnan(to_vector<float>(max(on_gpu(withnan)))[0]));
  EXPECT_TRUE(std::isnan(to_vector<float>(amin(on_gpu(withnan), {1}))[0]));
}

TEST(CudaReduceTest, SumToAndMulSumToMatchCpu) {
  QFLOW_REQUIRE_CUDA();
  const Tensor x = randn_cpu({8, 16, 7, 7}, 60);
  const Tensor y = randn_cpu({8, 16, 7, 7}, 61);
  const Tensor xg = on_gpu(x), yg = on_gpu(y);
  for (const IntList& to : {IntList{1, 16, 1, 1}, IntList{16, 1, 1}, IntList{1, 1, 7, 1}, IntList{7}, IntList{1}}) {
    expect_match(sum_to(xg, to), sum_to(x, to), kSum, "sum_to row-major");
    expect_match(sum_to(channels_last(xg), to), sum_to(x, to), kSum, "sum_to channels-last");
    expect_match(mul_sum_to(channels_last(xg), yg, to), mul_sum_to(x, y, to), kSum, "mul_sum_to mixed layouts");
    expect_match(mul_sum_to(channels_last(xg), channels_last(yg), to), mul_sum_to(x, y, to), kSum,
                 "mul_sum_to channels-last");
  }
  EXPECT_TRUE(sum_to(xg, {8, 16, 7, 7}).is_same(xg));
  // A bias gradient: (N, C) to (C).
  const Tensor grad = randn_cpu({128, 10}, 62);
  expect_match(sum_to(on_gpu(grad), {10}), sum_to(grad, {10}), kSum, "sum_to (N, C) -> (C)");
  expect_match(sum_to(on_gpu(grad).t(), {10, 1}), sum_to(grad.t(), {10, 1}), kSum, "sum_to transposed");
  Generator gen(63);
  const Tensor xi = randint(-9, 9, {5, 4, 3}, DType::Int64, &gen);
  expect_match(sum_to(on_gpu(xi), {4, 1}), sum_to(xi, {4, 1}), kExact, "sum_to int64 keeps int64");
}

TEST(CudaReduceTest, ValueSelectingBackwardMatchesCpu) {
  QFLOW_REQUIRE_CUDA();
  const Tensor x = randn_cpu({6, 9, 5}, 70);
  for (int64_t dim : {0, 1, -1}) {
    for (bool keepdim : {false, true}) {
      const auto [gv, gi] = max(on_gpu(x), dim, keepdim);
      const auto [wv, wi] = max(x, dim, keepdim);
      const Tensor grad = randn_cpu(wv.sizes(), 71);
      const Tensor got = call_op("value_selecting_reduction_backward",
                                 {on_gpu(grad), Value(dim), gi, Value(IntList{6, 9, 5}), Value(keepdim)})
                             .at(0)
                             .tensor();
      const Tensor want = call_op("value_selecting_reduction_backward",
                                  {grad, Value(dim), wi, Value(IntList{6, 9, 5}), Value(keepdim)})
                              .at(0)
                              .tensor();
      expect_match(got, want, kExact, "value_selecting_reduction_backward dim " + std::to_string(dim));
    }
  }
  // Through autograd: the gradient of max.dim and of amax-based code paths.
  Tensor xg = clone(channels_last(on_gpu(randn_cpu({2, 3, 4, 5}, 72))));  // a channels-last leaf
  xg.requires_grad_();
  sum(std::get<0>(max(xg, 1))).backward();
  Tensor xc = randn_cpu({2, 3, 4, 5}, 72);
  xc.requires_grad_();
  sum(std::get<0>(max(xc, 1))).backward();
  expect_match(xg.grad(), xc.grad(), kExact, "max.dim gradient");
}
