// Gradients of the element-wise ops (autograd/derivatives/{arithmetic,unary,clamp,binary_math,
// compare}.cpp): gradcheck for every differentiable op, broadcasting included, plus the
// conventions at kinks and ties that PyTorch fixes (relu'(0) = 0, clamp's bounds, max ties).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "qflow/qflow.h"

using namespace qflow;
using ::testing::HasSubstr;

namespace {

using Fn = std::function<Tensor(const TensorList&)>;

// Irregular float64 values (no ties) that require grad, kept at least 0.25 away from zero.
Tensor nonzero(const IntList& sizes, double phase = 0.3) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double s = std::sin(1.7 * static_cast<double>(i) + phase);
    v[static_cast<size_t>(i)] = (s < 0 ? -1.0 : 1.0) * (0.25 + 1.5 * std::abs(s));
  }
  return from_vector<double>(v, sizes).requires_grad_();
}

// Irregular values in [0.4, 2.4], for log, sqrt, rsqrt and pow bases.
Tensor positive(const IntList& sizes, double phase = 0.3) {
  Tensor x = nonzero(sizes, phase).detach();
  return add(abs(x), Scalar(0.15)).requires_grad_();
}

Tensor leaf(std::vector<double> v, const IntList& sizes = {}) { return from_vector<double>(v, sizes).requires_grad_(); }

bool check_unary(const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  return gradcheck([&](const TensorList& in) { return f(in[0]); }, {x});
}

// d(sum(f(x) * seed))/dx evaluated by the engine, for value checks at special points.
std::vector<double> grad_of(const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  Tensor y = f(x);
  y.backward(ones_like(y));
  return to_vector<double>(x.grad());
}

}  // namespace

// ---- unary ------------------------------------------------------------------------------------

TEST(UnaryGradTest, SmoothUnaryOps) {
  EXPECT_TRUE(check_unary([](const Tensor& x) { return neg(x); }, nonzero({2, 3})));
  EXPECT_TRUE(check_unary([](const Tensor& x) { return abs(x); }, nonzero({2, 3})));
  EXPECT_TRUE(check_unary([](const Tensor& x) { return exp(x); }, nonzero({2, 3})));
  EXPECT_TRUE(check_unary([](const Tensor& x) { return log(x); }, positive({2, 3})));
  EXPECT_TRUE(check_unary([](const Tensor& x) { return sqrt(x); }, positive({2, 3})));
  EXPECT_TRUE(check_unary([](const Tensor& x) { return rsqrt(x); }, positive({2, 3})));
  EXPECT_TRUE(check_unary([](const Tensor& x) { return sigmoid(x); }, nonzero({2, 3})));
  EXPECT_TRUE(check_unary([](const Tensor& x) { return tanh(x); }, nonzero({2, 3})));
  EXPECT_TRUE(check_unary([](const Tensor& x) { return relu(x); }, nonzero({2, 3})));
  // Through a non-contiguous view.
  EXPECT_TRUE(check_unary([](const Tensor& x) { return sigmoid(x.t()); }, nonzero({3, 2})));
}

TEST(UnaryGradTest, NodeNames) {
  Tensor x = positive({3});
  EXPECT_EQ(exp(x).grad_fn_name(), "ExpBackward");
  EXPECT_EQ(log(x).grad_fn_name(), "LogBackward");
  EXPECT_EQ(sigmoid(x).grad_fn_name(), "SigmoidBackward");
  EXPECT_EQ(relu(x).grad_fn_name(), "ReluBackward");
  EXPECT_EQ((-x).grad_fn_name(), "NegBackward");
  EXPECT_EQ(round(x).grad_fn_name(), "RoundBackward");
}

TEST(UnaryGradTest, PiecewiseConstantOpsHaveZeroGradient) {
  // Away from the jumps the finite difference is 0 too; PyTorch returns zeros, not an error.
  Tensor x = leaf({0.3, 1.2, -0.7, 2.1, -1.9});
  EXPECT_TRUE(check_unary([](const Tensor& t) { return sign(t); }, x));
  EXPECT_TRUE(check_unary([](const Tensor& t) { return round(t); }, x));
  EXPECT_TRUE(check_unary([](const Tensor& t) { return floor(t); }, x));
  EXPECT_EQ(grad_of([](const Tensor& t) { return floor(t); }, leaf({0.5, 1.0})), (std::vector<double>{0, 0}));
}

TEST(UnaryGradTest, KinksFollowPyTorch) {
  // PyTorch: relu'(0) = 0, abs'(0) = 0.
  EXPECT_EQ(grad_of([](const Tensor& t) { return relu(t); }, leaf({-1, 0, 2})), (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(grad_of([](const Tensor& t) { return abs(t); }, leaf({-1, 0, 2})), (std::vector<double>{-1, 0, 1}));
  // sigmoid'(0) = 1/4, tanh'(0) = 1, sqrt'(4) = 1/4, rsqrt'(4) = -1/16.
  EXPECT_EQ(grad_of([](const Tensor& t) { return sigmoid(t); }, leaf({0})), (std::vector<double>{0.25}));
  EXPECT_EQ(grad_of([](const Tensor& t) { return tanh(t); }, leaf({0})), (std::vector<double>{1}));
  EXPECT_EQ(grad_of([](const Tensor& t) { return sqrt(t); }, leaf({4})), (std::vector<double>{0.25}));
  EXPECT_EQ(grad_of([](const Tensor& t) { return rsqrt(t); }, leaf({4})), (std::vector<double>{-1.0 / 16}));
}

// ---- relu / clamp -----------------------------------------------------------------------------

TEST(ClampGradTest, Gradcheck) {
  Tensor x = leaf({-1.3, -0.2, 0.1, 0.35, 0.9, -0.8}, {2, 3});
  EXPECT_TRUE(check_unary([](const Tensor& t) { return clamp(t, Scalar(-0.5), Scalar(0.5)); }, x));
  EXPECT_TRUE(check_unary([](const Tensor& t) { return clamp(t, Scalar(0), std::nullopt); }, x));
  EXPECT_TRUE(check_unary([](const Tensor& t) { return clamp(t, std::nullopt, Scalar(0.2)); }, x));
  EXPECT_EQ(clamp(x, Scalar(0), Scalar(1)).grad_fn_name(), "ClampBackward");
}

TEST(ClampGradTest, GradientPassesAtTheBounds) {
  // PyTorch: clamp(x, 0, 1).backward(ones) gives [0, 1, 1, 1, 0] for x = [-1, 0, 0.5, 1, 2].
  EXPECT_EQ(grad_of([](const Tensor& t) { return clamp(t, Scalar(0), Scalar(1)); }, leaf({-1, 0, 0.5, 1, 2})),
            (std::vector<double>{0, 1, 1, 1, 0}));
}

TEST(ClampGradTest, InPlaceVariantsDifferentiateThroughTheirTwin) {
  Tensor x = leaf({-1.5, 0.5, 2.0});
  Tensor y = x * Scalar(2.0);
  y.relu_();
  EXPECT_EQ(y.grad_fn_name(), "ReluBackward");
  y.backward(ones_like(y));
  EXPECT_EQ(to_vector<double>(x.grad()), (std::vector<double>{0, 2, 2}));

  Tensor a = leaf({-1.5, 0.5, 2.0});
  Tensor b = a * Scalar(1.0);
  b.clamp_(Scalar(-1), Scalar(1));
  EXPECT_EQ(b.grad_fn_name(), "ClampBackward");
  EXPECT_EQ(to_vector<double>(b), (std::vector<double>{-1, 0.5, 1}));
  b.backward(ones_like(b));
  EXPECT_EQ(to_vector<double>(a.grad()), (std::vector<double>{0, 1, 0}));
  EXPECT_TRUE(gradcheck([](const TensorList& in) { Tensor t = in[0] * Scalar(1.0); return t.relu_(); }, {nonzero({4})}));
  EXPECT_TRUE(gradcheck(
      [](const TensorList& in) { Tensor t = in[0] * Scalar(1.0); return t.clamp_(Scalar(-0.5), Scalar(0.5)); },
      {leaf({-1.3, -0.2, 0.1, 0.9})}));
}

// ---- pow / minimum / maximum ------------------------------------------------------------------

TEST(PowGradTest, TensorExponent) {
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return pow(in[0], in[1]); }, {positive({2, 3}), nonzero({2, 3}, 1.1)}));
  // Broadcasting: (3, 1) ** (4,) -> (3, 4); the engine sums each gradient back.
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return pow(in[0], in[1]); }, {positive({3, 1}), nonzero({4}, 0.9)}));
  // Negative bases with integral exponents are fine as long as only the base is checked.
  Tensor e = from_vector<double>({2, 3, 1});
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return pow(in[0], in[1]); }, {leaf({-1.5, -0.7, 2.0}), e}));
}

TEST(PowGradTest, ScalarExponent) {
  for (double ex : {2.0, 0.5, 3.0, -1.0, -0.5, -2.0, 2.7, 1.0, 0.0}) {
    EXPECT_TRUE(check_unary([ex](const Tensor& t) { return pow(t, Scalar(ex)); }, positive({2, 3}))) << "exponent " << ex;
  }
  EXPECT_TRUE(check_unary([](const Tensor& t) { return pow(t, Scalar(3)); }, nonzero({5})));
  EXPECT_TRUE(check_unary([](const Tensor& t) { return t.pow(Scalar(2)); }, nonzero({5})));
  EXPECT_EQ(pow(positive({2}), Scalar(2)).grad_fn_name(), "PowBackward");
}

TEST(PowGradTest, ZeroBaseAndZeroExponentConventions) {
  // PyTorch: d(0^0)/da = 0 (not 0 * 0^-1 = nan) and d(0^b)/db = 0 for b >= 0.
  Tensor a = leaf({0.0, 0.0, 2.0});
  Tensor b = leaf({0.0, 2.0, 0.0});
  Tensor y = pow(a, b);
  y.backward(ones_like(y));
  EXPECT_EQ(to_vector<double>(a.grad()), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(to_vector<double>(b.grad()), (std::vector<double>{0, 0, std::log(2.0)}));
  EXPECT_EQ(grad_of([](const Tensor& t) { return pow(t, Scalar(0)); }, leaf({0.0, 3.0})), (std::vector<double>{0, 0}));
}

TEST(MinMaxGradTest, GradcheckWithBroadcasting) {
  const Fn mn = [](const TensorList& in) { return minimum(in[0], in[1]); };
  const Fn mx = [](const TensorList& in) { return maximum(in[0], in[1]); };
  EXPECT_TRUE(gradcheck(mn, {nonzero({2, 3}), nonzero({2, 3}, 2.0)}));
  EXPECT_TRUE(gradcheck(mx, {nonzero({2, 3}), nonzero({2, 3}, 2.0)}));
  EXPECT_TRUE(gradcheck(mn, {nonzero({2, 3}), nonzero({3}, 2.0)}));
  EXPECT_TRUE(gradcheck(mx, {nonzero({2, 1}), nonzero({1, 3}, 2.0)}));
  EXPECT_EQ(maximum(nonzero({2}), nonzero({2}, 1.0)).grad_fn_name(), "MaximumBackward");
}

TEST(MinMaxGradTest, TiesSplitTheGradient) {
  // PyTorch: maximum(a, b) with a = [1, 2, 3], b = [1, 5, 0] gives a.grad = [0.5, 0, 1],
  // b.grad = [0.5, 1, 0]; minimum gives a.grad = [0.5, 1, 0], b.grad = [0.5, 0, 1].
  for (bool is_max : {true, false}) {
    Tensor a = leaf({1, 2, 3});
    Tensor b = leaf({1, 5, 0});
    Tensor y = is_max ? maximum(a, b) : minimum(a, b);
    y.backward(ones_like(y));
    EXPECT_EQ(to_vector<double>(a.grad()), is_max ? (std::vector<double>{0.5, 0, 1}) : (std::vector<double>{0.5, 1, 0}));
    EXPECT_EQ(to_vector<double>(b.grad()), is_max ? (std::vector<double>{0.5, 1, 0}) : (std::vector<double>{0.5, 0, 1}));
  }
}

// ---- comparisons and where --------------------------------------------------------------------

TEST(CompareGradTest, ComparisonsCarryNoHistory) {
  Tensor a = nonzero({3});
  Tensor b = nonzero({3}, 2.0);
  for (const Tensor& m : {eq(a, b), ne(a, b), lt(a, b), le(a, b), gt(a, b), ge(a, b), eq(a, Scalar(0)), ne(a, Scalar(0)),
                          lt(a, Scalar(0)), le(a, Scalar(0)), gt(a, Scalar(0)), ge(a, Scalar(0))}) {
    EXPECT_EQ(m.dtype(), DType::Bool);
    EXPECT_FALSE(m.requires_grad());
    EXPECT_EQ(m.grad_fn_name(), "");
  }
}

TEST(WhereGradTest, GradcheckWithBroadcasting) {
  Tensor cond = from_vector<bool>({true, false, false, true, true, false}, {2, 3});
  const Fn f = [cond](const TensorList& in) { return where(cond, in[0], in[1]); };
  EXPECT_TRUE(gradcheck(f, {nonzero({2, 3}), nonzero({2, 3}, 1.0)}));
  EXPECT_TRUE(gradcheck(f, {nonzero({1, 3}), nonzero({2, 1}, 1.0)}));
  EXPECT_TRUE(gradcheck(f, {nonzero({3}), from_vector<double>({0.5})}));  // only self requires grad

  Tensor x = leaf({1, 2, 3});
  Tensor y = leaf({4});
  Tensor z = where(from_vector<bool>({true, false, false}), x, y);
  EXPECT_EQ(z.grad_fn_name(), "WhereBackward");
  z.backward(from_vector<double>({10, 20, 30}));
  EXPECT_EQ(to_vector<double>(x.grad()), (std::vector<double>{10, 0, 0}));
  EXPECT_EQ(to_vector<double>(y.grad()), (std::vector<double>{50}));
}

// ---- arithmetic (autograd/derivatives/arithmetic.cpp) -----------------------------------------

TEST(ArithmeticGradTest, TensorForms) {
  const TensorList same = {nonzero({2, 3}), nonzero({2, 3}, 1.0)};
  const TensorList bcast = {nonzero({2, 3}), nonzero({3}, 1.0)};
  for (const TensorList& in : {same, bcast}) {
    EXPECT_TRUE(gradcheck([](const TensorList& t) { return t[0] + t[1]; }, in));
    EXPECT_TRUE(gradcheck([](const TensorList& t) { return t[0] - t[1]; }, in));
    EXPECT_TRUE(gradcheck([](const TensorList& t) { return t[0] * t[1]; }, in));
    EXPECT_TRUE(gradcheck([](const TensorList& t) { return t[0] / t[1]; }, in));
    EXPECT_TRUE(gradcheck([](const TensorList& t) { return add(t[0], t[1], Scalar(2.5)); }, in));
    EXPECT_TRUE(gradcheck([](const TensorList& t) { return sub(t[0], t[1], Scalar(-1.5)); }, in));
  }
  // The broadcast operand on the left, too.
  EXPECT_TRUE(gradcheck([](const TensorList& t) { return t[0] / t[1]; }, {nonzero({2, 1}), nonzero({2, 3}, 1.0)}));
}

TEST(ArithmeticGradTest, ScalarAndReflectedForms) {
  const Tensor x = nonzero({2, 3});
  EXPECT_TRUE(check_unary([](const Tensor& t) { return t + Scalar(2); }, x));
  EXPECT_TRUE(check_unary([](const Tensor& t) { return t - Scalar(0.5); }, x));
  EXPECT_TRUE(check_unary([](const Tensor& t) { return t * Scalar(-3); }, x));
  EXPECT_TRUE(check_unary([](const Tensor& t) { return t / Scalar(4); }, x));
  EXPECT_TRUE(check_unary([](const Tensor& t) { return Scalar(2) - t; }, x));
  EXPECT_TRUE(check_unary([](const Tensor& t) { return Scalar(3) / t; }, x));
  EXPECT_EQ((Scalar(3) / x).grad_fn_name(), "RdivBackward");
  EXPECT_EQ((Scalar(3) - x).grad_fn_name(), "RsubBackward");
}

TEST(ArithmeticGradTest, InPlaceArithmeticOnNonLeaf) {
  Tensor x = leaf({1, 2, 3});
  Tensor y = x * Scalar(1.0);
  y *= x;           // y = x^2
  y += Scalar(1);   // y = x^2 + 1
  y.backward(ones_like(y));
  EXPECT_EQ(to_vector<double>(x.grad()), (std::vector<double>{2, 4, 6}));
  Tensor leaf_x = leaf({1});
  EXPECT_THAT([&] {
    try {
      leaf_x += Scalar(1);
    } catch (const Error& e) {
      return e.message();
    }
    return std::string("<no error>");
  }(), HasSubstr("a leaf tensor that requires grad is being used in an in-place operation"));
}
