// CUDA element-wise, copy, index, dropout and random kernels against the CPU kernels, on the
// same random inputs: contiguous, transposed (non-contiguous) and channels-last operands,
// broadcasting, odd sizes (1, 7, 1000003), every dtype the ops take, in-place forms and the
// backward ops. See cuda/kernels/pointwise_ops.cpp, copy_ops.cpp, index_ops.cpp.
//
// Tolerances (relative_error: max |got - want| / max |want|):
//  * 0 for ops whose device result is the same IEEE operation as the CPU's (add, sub, mul,
//    neg, abs, relu, clamp, comparisons, where, copies, casts, gathers, masks): bit-equal;
//  * 1e-6 for ops that may round differently by an ulp or two: division and a + alpha * b (the
//    device compiler may fuse a multiply-add, one rounding instead of two), pow, and the
//    transcendental functions (CUDA's expf/logf/tanhf/powf are within 2 ulp, the CPU's Eigen
//    within 1 ulp: a few 2^-24 relative to an element, below 1e-6 relative to the largest).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "qflow/qflow.h"

using namespace qflow;
using namespace qflow::testing;
using qflow::testing_util::relative_error;

namespace {

constexpr double kExact = 0.0;
constexpr double kUlps = 1e-6;

Tensor on_gpu(const Tensor& t) { return t.to(qflow::testing::gpu()); }

// One pair of operands, made from CPU bases by `make_a`/`make_b` (a layout or a view) on both
// devices: the GPU operands are the same views of the copied bases.
struct BinaryCase {
  std::string name;
  Tensor a, b;
  std::function<Tensor(const Tensor&)> make_a = [](const Tensor& t) { return t; };
  std::function<Tensor(const Tensor&)> make_b = [](const Tensor& t) { return t; };
};

std::vector<BinaryCase> binary_cases() {
  std::vector<BinaryCase> cases;
  cases.push_back({"one element", randn_cpu({1}, 1), randn_cpu({1}, 2)});
  cases.push_back({"7", randn_cpu({7}, 3), randn_cpu({7}, 4)});
  cases.push_back({"1000003", randn_cpu({1000003}, 5), randn_cpu({1000003}, 6)});
  cases.push_back({"broadcast (2,3,5,7)+(3,1,7)", randn_cpu({2, 3, 5, 7}, 7), randn_cpu({3, 1, 7}, 8)});
  cases.push_back({"broadcast (1)+(4,5)", randn_cpu({1}, 9), randn_cpu({4, 5}, 10)});
  cases.push_back({"0-d with (5)", randn_cpu({}, 11), randn_cpu({5}, 12)});
  cases.push_back({"channels-last + per-channel", randn_cpu({4, 6, 5, 5}, 13), randn_cpu({1, 6, 1, 1}, 14),
                   channels_last});
  cases.push_back({"channels-last + channels-last", randn_cpu({4, 6, 5, 5}, 15), randn_cpu({4, 6, 5, 5}, 16),
                   channels_last, channels_last});
  cases.push_back({"channels-last + row-major", randn_cpu({3, 8, 7, 9}, 17), randn_cpu({3, 8, 7, 9}, 18), channels_last});
  cases.push_back({"transposed + row-major", randn_cpu({17, 33}, 19), randn_cpu({33, 17}, 20),
                   [](const Tensor& t) { return t.t(); }});
  cases.push_back({"sliced + expanded", randn_cpu({9, 40}, 21), randn_cpu({9, 1}, 22),
                   [](const Tensor& t) { return t.narrow(1, 3, 31); }});
  return cases;
}

using BinaryFn = std::function<Tensor(const Tensor&, const Tensor&)>;

void check_binary(const std::string& op, const BinaryFn& f, double tol,
                  const std::function<Tensor(const Tensor&)>& prep_b = [](const Tensor& t) { return t; }) {
  for (const BinaryCase& c : binary_cases()) {
    const Tensor b = prep_b(c.b);
    const Tensor want = f(c.make_a(c.a), c.make_b(b));
    const Tensor got = f(c.make_a(on_gpu(c.a)), c.make_b(on_gpu(b)));
    expect_match(got, want, tol, op + ", " + c.name);
  }
}

Tensor positive(const Tensor& t) { return add(abs(t), 0.5); }

}  // namespace

TEST(CudaPointwiseTest, BinaryArithmeticMatchesCpu) {
  QFLOW_REQUIRE_CUDA();
  check_binary("add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, kExact);
  check_binary("add alpha", [](const Tensor& a, const Tensor& b) { return add(a, b, 2.5); }, kUlps);
  check_binary("sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, kExact);
  check_binary("mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, kExact);
  check_binary("div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, kUlps, positive);
  check_binary("add_relu", [](const Tensor& a, const Tensor& b) { return add_relu(a, b); }, kExact);
  check_binary("minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, kExact);
  check_binary("maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, kExact);
  check_binary("pow", [](const Tensor& a, const Tensor& b) { return pow(positive(a), b); }, kUlps);
}

TEST(CudaPointwiseTest, ElementwiseResultsKeepChannelsLast) {
  QFLOW_REQUIRE_CUDA();
  const Tensor x = channels_last(on_gpu(randn_cpu({4, 6, 5, 5}, 30)));
  const Tensor bias = on_gpu(randn_cpu({1, 6, 1, 1}, 31));
  EXPECT_EQ(add(x, bias).strides(), x.strides());
  EXPECT_EQ(relu(x).strides(), x.strides());
  EXPECT_EQ(mul(x, 2.0).strides(), x.strides());
  EXPECT_EQ(clone(x).strides(), x.strides());
  EXPECT_EQ(gt(x, 0.0).strides(), x.strides());
  EXPECT_TRUE(contiguous(x).is_contiguous());
}

TEST(CudaPointwiseTest, MixedDtypesPromoteLikeTheCpu) {
  QFLOW_REQUIRE_CUDA();
  Generator gen(40);
  const Tensor i64 = randint(-5, 6, {6, 7}, DType::Int64, &gen);
  const Tensor i32 = randint(-5, 6, {7}, DType::Int32, &gen);
  const Tensor f32 = randn_cpu({6, 7}, 41);
  const Tensor f64 = randn_cpu({7}, 42, DType::Float64);
  const Tensor b = gt(randn_cpu({6, 7}, 43), 0.0);
  expect_match(add(on_gpu(i64), on_gpu(i32)), add(i64, i32), kExact, "int64 + int32");
  expect_match(mul(on_gpu(i64), on_gpu(f32)), mul(i64, f32), kExact, "int64 * float32");
  expect_match(sub(on_gpu(f32), on_gpu(f64)), sub(f32, f64), kExact, "float32 - float64");
  expect_match(div(on_gpu(i64), on_gpu(add(i32, 10))), div(i64, add(i32, 10)), kUlps, "int64 / int32 is float32");
  expect_match(add(on_gpu(b), on_gpu(b)), add(b, b), kExact, "bool + bool is or");
  expect_match(mul(on_gpu(b), on_gpu(i64)), mul(b, i64), kExact, "bool * int64");
  expect_match(add(on_gpu(i64), on_gpu(i64), 3), add(i64, i64, 3), kExact, "int64 + 3 * int64");
  expect_match(pow(on_gpu(i64), on_gpu(abs(i32))), pow(i64, abs(i32)), kExact, "int64 ** int32");
  expect_match(maximum(on_gpu(i64), on_gpu(f32)), maximum(i64, f32), kExact, "maximum int64, float32");
}

TEST(CudaPointwiseTest, ScalarArithmeticMatchesCpu) {
  QFLOW_REQUIRE_CUDA();
  Generator gen(50);
  const Tensor x = randn_cpu({1000003}, 51);
  const Tensor xt = randn_cpu({37, 19}, 52).t();
  const Tensor xi = randint(-50, 50, {1001}, DType::Int64, &gen);
  const Tensor xb = gt(randn_cpu({33}, 53), 0.0);
  for (const Tensor& t : {x, xt}) {
    const Tensor g = on_gpu(t);
    expect_match(add(g, 1.5), add(t, 1.5), kExact, "add.Scalar");
    expect_match(sub(g, 0.25), sub(t, 0.25), kExact, "sub.Scalar");
    expect_match(mul(g, -3.0), mul(t, -3.0), kExact, "mul.Scalar");
    expect_match(div(g, 7.0), div(t, 7.0), kExact, "div.Scalar");
    expect_match(rsub(g, 2.0), rsub(t, 2.0), kExact, "rsub");
    expect_match(rdiv(positive(g), 3.0), rdiv(positive(t), 3.0), kExact, "rdiv");
    for (double e : {2.0, 0.5, 3.0, -1.0, -0.5, -2.0, 1.7})
      expect_match(pow(positive(g), e), pow(positive(t), e), kUlps, "pow.Scalar " + std::to_string(e));
  }
  const Tensor gi = on_gpu(xi);
  expect_match(add(gi, 3), add(xi, 3), kExact, "int64 + 3");
  expect_match(add(gi, 1.5), add(xi, 1.5), kExact, "int64 + 1.5 is float32");
  expect_match(mul(gi, 7), mul(xi, 7), kExact, "int64 * 7");
  expect_match(div(gi, 4), div(xi, 4), kExact, "int64 / 4 is float32");
  expect_match(rsub(gi, 10), rsub(xi, 10), kExact, "10 - int64");
  expect_match(pow(gi, 2), pow(xi, 2), kExact, "int64 ** 2");
  expect_match(pow(gi, 3), pow(xi, 3), kExact, "int64 ** 3");
  expect_match(add(on_gpu(xb), true), add(xb, true), kExact, "bool + true");
  expect_match(mul(on_gpu(xb), false), mul(xb, false), kExact, "bool * false");
  expect_match(add(on_gpu(xb), 2), add(xb, 2), kExact, "bool + 2 is int64");
}

TEST(CudaPointwiseTest, InPlaceOpsMatchCpuAndBumpTheVersion) {
  QFLOW_REQUIRE_CUDA();
  const Tensor x = randn_cpu({4, 6, 5, 5}, 60);
  const Tensor y = randn_cpu({6, 1, 1}, 61);
  using InPlace = std::function<void(Tensor&, const Tensor&)>;
  const std::vector<std::pair<std::string, InPlace>> ops = {
      {"add_", [](Tensor& s, const Tensor& o) { add_(s, o, 0.5); }},
      {"sub_", [](Tensor& s, const Tensor& o) { sub_(s, o); }},
      {"mul_", [](Tensor& s, const Tensor& o) { mul_(s, o); }},
      {"div_", [](Tensor& s, const Tensor& o) { div_(s, positive(o)); }},
      {"add_.Scalar", [](Tensor& s, const Tensor&) { add_(s, 2.0); }},
      {"sub_.Scalar", [](Tensor& s, const Tensor&) { sub_(s, 2.0); }},
      {"mul_.Scalar", [](Tensor& s, const Tensor&) { mul_(s, 0.5); }},
      {"div_.Scalar", [](Tensor& s, const Tensor&) { div_(s, 4.0); }},
      {"relu_", [](Tensor& s, const Tensor&) { relu_(s); }},
      {"clamp_", [](Tensor& s, const Tensor&) { clamp_(s, Scalar(-0.5), Scalar(0.75)); }},
  };
  for (const auto& [name, f] : ops) {
    for (bool cl : {false, true}) {
      Tensor want = x.clone();
      f(want, y);
      Tensor got = on_gpu(x);
      if (cl) got = channels_last(got);
      const auto strides = got.strides();
      const uint64_t v0 = got.version();
      f(got, on_gpu(y));
      EXPECT_GT(got.version(), v0) << name;
      EXPECT_EQ(got.strides(), strides) << name;
      expect_match(got, want, name == "add_" || name == "div_" ? kUlps : kExact, name + (cl ? " channels-last" : ""));
    }
  }
  // Into a transposed view: the base sees the writes.
  const Tensor base_cpu = randn_cpu({9, 13}, 62);
  Tensor base = on_gpu(base_cpu);
  Tensor view = base.t();
  mul_(view, 3.0);
  Tensor want_base = base_cpu.clone();
  Tensor want_view = want_base.t();
  mul_(want_view, 3.0);
  expect_match(base, want_base, kExact, "mul_ into a transposed view");
}

TEST(CudaPointwiseTest, UnaryOpsMatchCpu) {
  QFLOW_REQUIRE_CUDA();
  using UnaryFn = std::function<Tensor(const Tensor&)>;
  const std::vector<std::tuple<std::string, UnaryFn, double>> ops = {
      {"neg", [](const Tensor& t) { return neg(t); }, kExact},
      {"abs", [](const Tensor& t) { return abs(t); }, kExact},
      {"sign", [](const Tensor& t) { return sign(t); }, kExact},
      {"round", [](const Tensor& t) { return round(mul(t, 4.0)); }, kExact},
      {"floor", [](const Tensor& t) { return floor(mul(t, 4.0)); }, kExact},
      {"exp", [](const Tensor& t) { return exp(t); }, kUlps},
      {"log", [](const Tensor& t) { return log(positive(t)); }, kUlps},
      {"sqrt", [](const Tensor& t) { return sqrt(positive(t)); }, kUlps},
      {"rsqrt", [](const Tensor& t) { return rsqrt(positive(t)); }, kUlps},
      {"sigmoid", [](const Tensor& t) { return sigmoid(mul(t, 10.0)); }, kUlps},
      {"tanh", [](const Tensor& t) { return tanh(t); }, kUlps},
      {"relu", [](const Tensor& t) { return relu(t); }, kExact},
      {"clamp", [](const Tensor& t) { return clamp(t, Scalar(-0.5), Scalar(0.5)); }, kExact},
      {"clamp max only", [](const Tensor& t) { return clamp(t, std::nullopt, Scalar(0.1)); }, kExact},
      {"hardtanh", [](const Tensor& t) { return hardtanh(t, -0.7, 0.3); }, kExact},
      {"relu6", [](const Tensor& t) { return relu6(mul(t, 5.0)); }, kExact},
      {"hardswish", [](const Tensor& t) { return hardswish(mul(t, 4.0)); }, kUlps},
      {"hardsigmoid", [](const Tensor& t) { return hardsigmoid(mul(t, 4.0)); }, kUlps},
      {"silu", [](const Tensor& t) { return silu(mul(t, 10.0)); }, kUlps},
      {"leaky_relu", [](const Tensor& t) { return leaky_relu(t, 0.2); }, kExact},
  };
  const Tensor flat = randn_cpu({1000003}, 70);
  const Tensor odd = randn_cpu({7}, 71);
  const Tensor nchw = randn_cpu({3, 5, 6, 7}, 72);
  const Tensor mat = randn_cpu({23, 41}, 73);
  const Tensor f64 = randn_cpu({129}, 74, DType::Float64);
  for (const auto& [name, f, tol] : ops) {
    expect_match(f(on_gpu(flat)), f(flat), tol, name + " 1000003");
    expect_match(f(on_gpu(odd)), f(odd), tol, name + " 7");
    expect_match(f(channels_last(on_gpu(nchw))), f(channels_last(nchw)), tol, name + " channels-last");
    expect_match(f(on_gpu(mat).t()), f(mat.t()), tol, name + " transposed");
    expect_match(f(on_gpu(f64)), f(f64), tol == kExact ? kExact : 1e-14, name + " float64");
  }
  // Integer inputs: exact ops keep the dtype, exp & co. compute in float32.
  Generator gen(75);
  const Tensor xi = randint(-20, 20, {333}, DType::Int64, &gen);
  const Tensor xu = randint(0, 200, {333}, DType::UInt8, &gen);
  expect_match(neg(on_gpu(xi)), neg(xi), kExact, "neg int64");
  expect_match(abs(on_gpu(xi)), abs(xi), kExact, "abs int64");
  expect_match(sign(on_gpu(xi)), sign(xi), kExact, "sign int64");
  expect_match(neg(on_gpu(xu)), neg(xu), kExact, "neg uint8 wraps");
  expect_match(relu(on_gpu(xi)), relu(xi), kExact, "relu int64");
  expect_match(clamp(on_gpu(xi), Scalar(-3), Scalar(4)), clamp(xi, Scalar(-3), Scalar(4)), kExact, "clamp int64");
  expect_match(clamp(on_gpu(xi), Scalar(0.5), std::nullopt), clamp(xi, Scalar(0.5), std::nullopt), kExact,
               "clamp int64 with a float bound is float32");
  expect_match(exp(on_gpu(div(xi, 10))), exp(div(xi, 10)), kUlps, "exp of float32 from int64");
  expect_match(sqrt(on_gpu(xu)), sqrt(xu), kUlps, "sqrt uint8 is float32");
  // NaN passes through relu and clamp, and wins in minimum/maximum.
  const Tensor nan = from_vector<float>({std::nanf(""), -1.0f, 2.0f});
  const auto r = to_vector<float>(relu(on_gpu(nan)));
  EXPECT_TRUE(std::isnan(r[0]));
  const auto m = to_vector<float>(minimum(on_gpu(nan), on_gpu(from_vector<float>({0.0f, 0.0f, std::nanf("")}))));
  EXPECT_TRUE(std::isnan(m[0]) && m[1] == -1.0f && std::isnan(m[2]));
}

TEST(CudaPointwiseTest, ActivationGradientsMatchCpu) {
  QFLOW_REQUIRE_CUDA();
  // Exact boundary values of every piecewise rule, then random ones.
  std::vector<float> v = {0.0f, -1.0f, 1.0f, -3.0f, 3.0f, 6.0f, -0.0f, 0.3f, -0.7f};
  const Tensor rnd = mul(randn_cpu({1000}, 80), 4.0);
  for (float e : to_vector<float>(rnd)) v.push_back(e);
  const Tensor x = from_vector(v);
  const Tensor g = randn_cpu({static_cast<int64_t>(v.size())}, 81);
  const Tensor xg = on_gpu(x), gg = on_gpu(g);
  expect_match(threshold_backward(gg, xg, 0.0), threshold_backward(g, x, 0.0), kExact, "threshold_backward");
  expect_match(threshold_backward(gg, xg, 0.5), threshold_backward(g, x, 0.5), kExact, "threshold_backward 0.5");
  expect_match(hardtanh_backward(gg, xg, -1.0, 1.0), hardtanh_backward(g, x, -1.0, 1.0), kExact, "hardtanh_backward");
  expect_match(hardtanh_backward(gg, xg, 0.0, 6.0), hardtanh_backward(g, x, 0.0, 6.0), kExact, "relu6 backward");
  expect_match(hardswish_backward(gg, xg), hardswish_backward(g, x), kUlps, "hardswish_backward");
  expect_match(hardsigmoid_backward(gg, xg), hardsigmoid_backward(g, x), kUlps, "hardsigmoid_backward");
  expect_match(silu_backward(gg, mul(xg, 10.0)), silu_backward(g, mul(x, 10.0)), kUlps, "silu_backward");
  expect_match(leaky_relu_backward(gg, xg, 0.1), leaky_relu_backward(g, x, 0.1), kExact, "leaky_relu_backward");
  // Channels-last activations with a row-major gradient (the classifier's), and the reverse.
  const Tensor a = randn_cpu({2, 8, 4, 4}, 82), ga = randn_cpu({2, 8, 4, 4}, 83);
  expect_match(threshold_backward(on_gpu(ga), channels_last(on_gpu(a)), 0.0), threshold_backward(ga, a, 0.0), kExact,
               "threshold_backward channels-last self");
  expect_match(leaky_relu_backward(channels_last(on_gpu(ga)), on_gpu(a), 0.01), leaky_relu_backward(ga, a, 0.01),
               kExact, "leaky_relu_backward channels-last grad");
}

TEST(CudaPointwiseTest, AutogradThroughElementwiseOpsMatchesCpu) {
  QFLOW_REQUIRE_CUDA();
  const Tensor x0 = randn_cpu({8, 3, 5, 5}, 90);
  const Tensor w0 = randn_cpu({1, 3, 1, 1}, 91);
  auto run = [](Tensor x, Tensor w) {
    x.requires_grad_();
    w.requires_grad_();
    const Tensor y = add(mul(relu(add(x, w)), 2.0), sigmoid(mul(x, w)));
    sum(mul(y, y)).backward();
    return std::make_pair(x.grad(), w.grad());
  };
  const auto [gx_cpu, gw_cpu] = run(x0.clone(), w0.clone());
  const auto [gx, gw] = run(clone(channels_last(on_gpu(x0))), on_gpu(w0));  // a channels-last leaf
  // Sums of 200 products in another order (float): 1e-5.
  expect_match(gx, gx_cpu, 1e-5, "d/dx");
  expect_match(gw, gw_cpu, 1e-5, "d/dw (a broadcast gradient, summed by sum_to)");
}

TEST(CudaPointwiseTest, ComparisonsAndWhereMatchCpu) {
  QFLOW_REQUIRE_CUDA();
  Generator gen(100);
  // Small integers in float32 make ties common.
  const Tensor a = randint(-3, 4, {6, 9}, DType::Float32, &gen);
  const Tensor b = randint(-3, 4, {9}, DType::Int64, &gen);
  const Tensor i8 = randint(-100, 100, {77}, DType::Int8, &gen);
  using Cmp = std::function<Tensor(const Tensor&, const Tensor&)>;
  using CmpS = std::function<Tensor(const Tensor&, const Scalar&)>;
  const std::vector<std::tuple<std::string, Cmp, CmpS>> ops = {
      {"eq", [](const Tensor& p, const Tensor& q) { return eq(p, q); }, [](const Tensor& p, const Scalar& s) { return eq(p, s); }},
      {"ne", [](const Tensor& p, const Tensor& q) { return ne(p, q); }, [](const Tensor& p, const Scalar& s) { return ne(p, s); }},
      {"lt", [](const Tensor& p, const Tensor& q) { return lt(p, q); }, [](const Tensor& p, const Scalar& s) { return lt(p, s); }},
      {"le", [](const Tensor& p, const Tensor& q) { return le(p, q); }, [](const Tensor& p, const Scalar& s) { return le(p, s); }},
      {"gt", [](const Tensor& p, const Tensor& q) { return gt(p, q); }, [](const Tensor& p, const Scalar& s) { return gt(p, s); }},
      {"ge", [](const Tensor& p, const Tensor& q) { return ge(p, q); }, [](const Tensor& p, const Scalar& s) { return ge(p, s); }},
  };
  for (const auto& [name, f, fs] : ops) {
    expect_match(f(on_gpu(a), on_gpu(b)), f(a, b), kExact, name + " float32 vs int64, broadcast");
    expect_match(f(on_gpu(a).t(), on_gpu(a).t()), f(a.t(), a.t()), kExact, name + " transposed");
    expect_match(fs(on_gpu(a), 1.0), fs(a, 1.0), kExact, name + " scalar");
    expect_match(fs(on_gpu(b), 0.5), fs(b, 0.5), kExact, name + " int64 vs 0.5");
    expect_match(fs(on_gpu(i8), 300), fs(i8, 300), kExact, name + " int8 vs 300");
    expect_match(fs(on_gpu(i8), -7), fs(i8, -7), kExact, name + " int8 vs -7");
  }
  const Tensor x = randn_cpu({4, 6, 5, 5}, 101), y = randn_cpu({6, 1, 1}, 102);
  const Tensor c = gt(x, 0.0);
  const Tensor xg = channels_last(on_gpu(x));
  expect_match(where(gt(xg, 0.0), xg, on_gpu(y)), where(c, x, y), kExact, "where channels-last, broadcast");
  expect_match(where(on_gpu(c), on_gpu(x), on_gpu(scalar_tensor(0.0, DType::Float32))),
               where(c, x, scalar_tensor(0.0, DType::Float32)), kExact, "where with a 0-d branch");
}

TEST(CudaPointwiseTest, WherePromotesLikeTheCpu) {
  QFLOW_REQUIRE_CUDA();
  Generator gen(103);
  const Tensor c = gt(randn_cpu({3, 5}, 104), 0.0);
  const Tensor x = randn_cpu({3, 5}, 105);
  const Tensor y = randint(-3, 3, {5}, DType::Int64, &gen);
  expect_match(where(on_gpu(c), on_gpu(x), on_gpu(y)), where(c, x, y), kExact, "where float32/int64");
}

TEST(CudaCopyTest, CastsClonesAndContiguousMatchCpu) {
  QFLOW_REQUIRE_CUDA();
  const Tensor base = mul(randn_cpu({31, 47}, 110), 40.0);
  const Tensor x = base.t();  // non-contiguous
  const Tensor xg = on_gpu(base).t();
  // Values inside every target's range: out-of-range float-to-integer conversions differ (the
  // device saturates, the CPU's are undefined).
  for (DType dt : {DType::Float32, DType::Float64, DType::Int64, DType::Int32, DType::Bool}) {
    expect_match(xg.to(dt), x.to(dt), kExact, std::string("to ") + std::string(dtype_name(dt)));
    expect_match(xg.to(dt).to(DType::Float32), x.to(dt).to(DType::Float32), kExact,
                 std::string("to float32 from ") + std::string(dtype_name(dt)));
  }
  expect_match(clamp(abs(xg), std::nullopt, Scalar(250)).to(DType::UInt8),
               clamp(abs(x), std::nullopt, Scalar(250)).to(DType::UInt8), kExact, "to uint8");
  expect_match(clamp(xg, Scalar(-120), Scalar(120)).to(DType::Int8), clamp(x, Scalar(-120), Scalar(120)).to(DType::Int8),
               kExact, "to int8");
  // clone keeps a dense layout; contiguous makes row-major, and returns a contiguous input itself.
  const Tensor cl = channels_last(on_gpu(randn_cpu({2, 3, 4, 5}, 111)));
  const Tensor c2 = clone(cl);
  EXPECT_EQ(c2.strides(), cl.strides());
  EXPECT_FALSE(c2.is_same(cl));
  expect_match(c2, cl.cpu(), kExact, "clone channels-last");
  const Tensor c3 = contiguous(cl);
  EXPECT_TRUE(c3.is_contiguous());
  expect_match(c3, cl.cpu(), kExact, "contiguous of channels-last");
  EXPECT_TRUE(contiguous(c3).is_same(c3));
  expect_match(contiguous(xg), contiguous(x), kExact, "contiguous of a transposed view");
  expect_match(on_gpu(randn_cpu({1000003}, 112)).to(DType::Float64), randn_cpu({1000003}, 112).to(DType::Float64),
               kExact, "to float64, 1000003");
}

TEST(CudaCopyTest, CopyFillAndZeroIntoViews) {
  QFLOW_REQUIRE_CUDA();
  // copy_ from the CPU into a transposed GPU view, with broadcasting.
  Tensor dst = zeros({5, 4}, DType::Float32, qflow::testing::gpu());
  Tensor dst_cpu = zeros({5, 4});
  Tensor view = dst.t(), view_cpu = dst_cpu.t();
  const Tensor src = randn_cpu({5}, 120);
  const uint64_t v0 = dst.version();
  copy_(view, src);
  copy_(view_cpu, src);
  EXPECT_GT(dst.version(), v0);
  expect_match(dst, dst_cpu, kExact, "copy_ CPU source into a GPU view");
  // A GPU source of another dtype, broadcast along dim 1.
  Generator gen(121);
  const Tensor si = randint(-9, 9, {4, 1}, DType::Int64, &gen);
  copy_(view, on_gpu(si));
  copy_(view_cpu, si);
  expect_match(dst, dst_cpu, kExact, "copy_ int64 GPU source, broadcast");
  // Overlapping source and destination (the source is read before any write lands).
  Tensor o = on_gpu(randn_cpu({6, 6}, 122));
  Tensor o_cpu = o.cpu();
  Tensor ot = o.t(), ot_cpu = o_cpu.t();
  copy_(o, ot);
  copy_(o_cpu, ot_cpu);
  expect_match(o, o_cpu, kExact, "copy_ of its own transpose");
  // fill_ and zero_ on a slice, a channels-last tensor and a bool tensor.
  Tensor f = on_gpu(randn_cpu({7, 9}, 123));
  Tensor f_cpu = f.cpu();
  Tensor fs = f.narrow(1, 2, 5), fs_cpu = f_cpu.narrow(1, 2, 5);
  fill_(fs, 2.5);
  fill_(fs_cpu, 2.5);
  expect_match(f, f_cpu, kExact, "fill_ of a slice");
  Tensor z = f.narrow(0, 1, 3), z_cpu = f_cpu.narrow(0, 1, 3);
  zero_(z);
  zero_(z_cpu);
  expect_match(f, f_cpu, kExact, "zero_ of rows");
  Tensor cl = channels_last(on_gpu(randn_cpu({2, 3, 4, 5}, 124)));
  fill_(cl, -0.0);
  EXPECT_TRUE(std::signbit(to_vector<float>(cl)[0]));
  zero_(cl);
  expect_match(cl, zeros({2, 3, 4, 5}), kExact, "zero_ channels-last");
  Tensor bt = zeros({1000003}, DType::Bool, qflow::testing::gpu());
  fill_(bt, true);
  expect_match(bt, full({1000003}, true, DType::Bool), kExact, "fill_ bool");
}

TEST(CudaIndexTest, CatStackIndexSelectIndexAddMatchCpu) {
  QFLOW_REQUIRE_CUDA();
  Generator gen(130);
  const Tensor a = randn_cpu({2, 3, 4}, 131);
  const Tensor b = randn_cpu({2, 4, 5}, 132).transpose(1, 2);  // (2, 5, 4), non-contiguous
  const Tensor c = randint(-5, 5, {2, 1, 4}, DType::Int64, &gen);
  const Tensor skip = empty({0});
  expect_match(cat({on_gpu(a), on_gpu(randn_cpu({2, 4, 5}, 132)).transpose(1, 2), on_gpu(c), on_gpu(skip)}, 1),
               cat({a, b, c, skip}, 1), kExact, "cat dim 1, mixed layouts and dtypes");
  expect_match(cat({on_gpu(a), on_gpu(a)}, 0), cat({a, a}, 0), kExact, "cat dim 0");
  expect_match(cat({on_gpu(a), on_gpu(a)}, -1), cat({a, a}, -1), kExact, "cat dim -1");
  expect_match(stack({on_gpu(a), on_gpu(a), on_gpu(a)}, 1), stack({a, a, a}, 1), kExact, "stack dim 1");
  const Tensor idx = from_vector<int32_t>({2, 0, 2, 1});
  const Tensor x = randn_cpu({3, 5, 7}, 133);
  expect_match(index_select(on_gpu(x), 0, on_gpu(idx)), index_select(x, 0, idx), kExact, "index_select dim 0");
  expect_match(index_select(channels_last(on_gpu(randn_cpu({2, 3, 4, 5}, 134))), 1, on_gpu(idx)),
               index_select(randn_cpu({2, 3, 4, 5}, 134), 1, idx), kExact, "index_select channels-last dim 1");
  const Tensor src = randn_cpu({3, 4, 7}, 135);
  expect_match(index_add(on_gpu(x), 1, on_gpu(from_vector<int64_t>({4, 1, 4, 0})), on_gpu(src), 2.0),
               index_add(x, 1, from_vector<int64_t>({4, 1, 4, 0}), src, 2.0), kUlps, "index_add, repeated indices");
}

TEST(CudaRandomTest, RandLikeDrawsTheCpuNumbers) {
  QFLOW_REQUIRE_CUDA();
  const Tensor like = randn_cpu({1000003}, 140);
  for (DType dt : {DType::Float32, DType::Float64}) {
    Generator g_cpu(77), g_gpu(77);
    const Tensor u_cpu = rand_like(like.to(dt), &g_cpu);
    const Tensor u = rand_like(on_gpu(like).to(dt), &g_gpu);
    // Same Philox stream, same integer-to-float mapping: bit-equal.
    expect_match(u, u_cpu, kExact, "rand_like");
    EXPECT_EQ(g_cpu.offset(), g_gpu.offset());
    const Tensor n_cpu = randn_like(like.to(dt), &g_cpu);
    const Tensor n = randn_like(on_gpu(like).to(dt), &g_gpu);
    // Box-Muller in double on both; the device's log/cos/sin may differ in the last bit.
    expect_match(n, n_cpu, dt == DType::Float32 ? 1e-6 : 1e-12, "randn_like");
    // Statistics, 4 sigma: mean 0.5 and 0; standard deviation 1/sqrt(12) and 1.
    const double count = 1000003.0;
    EXPECT_NEAR(mean(u).item<double>(), 0.5, 4 * std::sqrt(1.0 / 12 / count));
    EXPECT_NEAR(mean(n).item<double>(), 0.0, 4 / std::sqrt(count));
    EXPECT_NEAR(qflow::std(n).item<double>(), 1.0, 4 * std::sqrt(0.5 / count));
  }
}

TEST(CudaRandomTest, DropoutKeepRateScaleAndBackward) {
  QFLOW_REQUIRE_CUDA();
  const double p = 0.3;
  const Tensor x = randn_cpu({1000003}, 150);
  const Tensor xg = on_gpu(x);
  manual_seed(2024);
  const auto [y, mask] = native_dropout(xg, p, true);
  EXPECT_EQ(mask.dtype(), DType::Bool);
  const Tensor mask_cpu = mask.cpu();
  // Keep rate 1 - p within 4 sigma of a binomial proportion.
  const double n = 1000003.0;
  const double kept = sum(mask).item<double>() / n;
  EXPECT_NEAR(kept, 1 - p, 4 * std::sqrt(p * (1 - p) / n));
  // Kept values scaled by 1 / (1 - p) (the same float product as the CPU's), dropped ones 0.
  const Tensor want = where(mask_cpu, mul(x, 1.0 / (1 - p)), scalar_tensor(0.0, DType::Float32));
  expect_match(y, want, kExact, "native_dropout output");
  // The backward uses the same mask.
  const Tensor g = randn_cpu({1000003}, 151);
  expect_match(native_dropout_backward(on_gpu(g), mask, 1.0 / (1 - p)),
               native_dropout_backward(g, mask_cpu, 1.0 / (1 - p)), kExact, "native_dropout_backward");
  // Reproducible for a seed, and drawn from the CPU's stream (Note [Counter-based draws on the GPU]).
  manual_seed(2024);
  const Tensor mask2 = std::get<1>(native_dropout(xg, p, true));
  expect_match(mask2, mask_cpu, kExact, "same seed, same mask");
  manual_seed(2024);
  expect_match(mask, std::get<1>(native_dropout(x, p, true)), kExact, "the CPU's mask for a contiguous input");
  // Channels-last inputs keep their layout; eval mode is the identity.
  const Tensor a = channels_last(on_gpu(randn_cpu({4, 8, 6, 6}, 152)));
  const auto [ya, ma] = native_dropout(a, 0.5, true);
  EXPECT_EQ(ya.strides(), a.strides());
  expect_match(ya, where(ma.cpu(), mul(a.cpu(), 2.0), scalar_tensor(0.0, DType::Float32)), kExact,
               "dropout channels-last");
  const auto [ye, me] = native_dropout(xg, p, false);
  EXPECT_TRUE(ye.is_same(xg));
  EXPECT_EQ(sum(me).item<int64_t>(), 1000003);
}
