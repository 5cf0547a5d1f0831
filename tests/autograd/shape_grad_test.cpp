// Gradients of the views and copies (autograd/derivatives/shape.cpp, copy.cpp), and the
// autograd semantics around them: in-place ops, the version counter, retain_graph,
// accumulation, NoGradGuard, detach, leaves.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "qflow/qflow.h"
#include "error_of.h"

using namespace qflow;
using ::testing::HasSubstr;

namespace {

using ::qflow::testing_util::error_of;  // tests/error_of.h

// Distinct, irregular float64 values (no ties, no symmetric patterns) that require grad.
Tensor input(const IntList& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(1.7 * static_cast<double>(i) + 0.3) * 2.0;
  return from_vector<double>(v, sizes).requires_grad_();
}

using Fn = std::function<Tensor(const TensorList&)>;
bool check(const Fn& fn, const IntList& sizes) { return gradcheck(fn, {input(sizes)}); }

}  // namespace

// ---- gradcheck of every differentiable view/copy op -------------------------------------------

TEST(ShapeGradTest, ViewReshapeFlatten) {
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].view({6, 2}); }, {3, 4}));
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].view({-1}); }, {2, 3, 2}));
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].reshape({4, 3}); }, {3, 4}));
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].t().reshape({12}); }, {3, 4}));  // copying reshape
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].flatten(1); }, {2, 3, 2}));
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].transpose(0, 2).flatten(); }, {2, 3, 2}));
  Tensor x = input({2, 3});
  EXPECT_EQ(x.view({6}).grad_fn_name(), "ViewBackward");
  EXPECT_EQ(x.reshape({6}).grad_fn_name(), "ReshapeBackward");
  EXPECT_EQ(x.flatten().grad_fn_name(), "FlattenBackward");
}

TEST(ShapeGradTest, PermuteTransposeT) {
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].permute({2, 0, 1}); }, {2, 3, 4}));
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].permute({-1, 0, -2}); }, {2, 3, 4}));
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].transpose(0, 2); }, {2, 3, 4}));
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].transpose(-1, 1); }, {2, 3, 4}));
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].t(); }, {3, 4}));
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].t(); }, {5}));
}

TEST(ShapeGradTest, NarrowSliceSelect) {
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].narrow(1, 1, 3); }, {4, 5}));
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].narrow(0, -2, 2); }, {4, 5}));
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].slice(1, 1, std::nullopt, 2); }, {3, 6}));
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].slice(0, -5, 7, 3); }, {8, 2}));
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].slice(0, 6, 2); }, {8}));  // empty slice
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].select(1, -1); }, {3, 4}));
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].select(0, 2).select(0, 1); }, {3, 4}));
}

TEST(ShapeGradTest, SliceWithStepScattersIntoTheRightPlaces) {
  Tensor x = input({7});
  x.slice(0, 1, std::nullopt, 3).backward(from_vector<double>({10, 20}));
  EXPECT_EQ(to_vector<double>(x.grad()), (std::vector<double>{0, 10, 0, 0, 20, 0, 0}));
}

TEST(ShapeGradTest, SqueezeUnsqueeze) {
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].squeeze(); }, {1, 3, 1, 2}));
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].squeeze(-2); }, {1, 3, 1, 2}));
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].squeeze(1); }, {1, 3, 1, 2}));
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].unsqueeze(-1); }, {3, 2}));
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].unsqueeze(0); }, {3, 2}));
}

TEST(ShapeGradTest, ExpandSumsOverBroadcastDims) {
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].expand({2, 3, 4}); }, {3, 1}));
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].expand({3, -1}); }, {1, 2}));
  Tensor x = input({3, 1});
  x.expand({2, 3, 4}).backward(ones({2, 3, 4}, DType::Float64));
  EXPECT_EQ(to_vector<double>(x.grad()), (std::vector<double>{8, 8, 8}));
}

TEST(ShapeGradTest, ContiguousCloneTo) {
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].t().contiguous(); }, {3, 4}));
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].contiguous(); }, {3, 4}));
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].clone(); }, {3, 4}));
  EXPECT_TRUE(check([](const TensorList& x) { return x[0].to(DType::Float64); }, {3, 4}));
  Tensor x = input({3, 4});
  EXPECT_EQ(x.contiguous().grad_fn_name(), "ContiguousBackward");
  EXPECT_TRUE(x.is_leaf());  // contiguous() of a contiguous leaf must not take over its history
}

TEST(ShapeGradTest, ToCastsTheGradientBackToTheInputDtype) {
  Tensor x = from_vector<float>({1, 2, 3}).requires_grad_();
  Tensor y = x.to(DType::Float64);
  EXPECT_EQ(y.grad_fn_name(), "ToCopyBackward");
  y.backward(from_vector<double>({0.5, 1.5, 2.5}));
  ASSERT_EQ(x.grad().dtype(), DType::Float32);
  EXPECT_EQ(to_vector<float>(x.grad()), (std::vector<float>{0.5f, 1.5f, 2.5f}));
  EXPECT_FALSE(x.to(DType::Int64).requires_grad());  // integer results carry no history
}

TEST(ShapeGradTest, DetachAndItemAreNotDifferentiable) {
  Tensor x = input({3});
  Tensor d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  EXPECT_EQ(d.impl()->storage(), x.impl()->storage());
  EXPECT_DOUBLE_EQ(x.select(0, 1).item<double>(), std::sin(1.7 + 0.3) * 2.0);
  Tensor b = input({3});
  Tensor e = d * b;
  e.backward(ones({3}, DType::Float64));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_EQ(to_vector<double>(b.grad()), to_vector<double>(x));
}

// ---- views and the base ----------------------------------------------------------------------

TEST(ShapeGradTest, GradientFlowsToTheBaseThroughAChainOfViews) {
  Tensor x = input({2, 3, 4});
  // p[c][a][b] = x[a][b][c]; p[1 + k] as (2, 6) row-major, element 3 → (a, b) = (1, 0): y[k] = x[1][0][1 + k]
  Tensor y = x.permute({2, 0, 1}).narrow(0, 1, 2).reshape({2, 6}).select(1, 3).unsqueeze(0);
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{1, 2}));
  y.backward(from_vector<double>({1, 2}, {1, 2}));
  std::vector<double> want(24, 0.0);
  want[12 + 0 + 1] = 1;
  want[12 + 0 + 2] = 2;
  EXPECT_EQ(to_vector<double>(x.grad()), want);
  EXPECT_TRUE(gradcheck(
      [](const TensorList& in) { return (in[0] * 3.0).transpose(0, 1).slice(0, 0, std::nullopt, 2).flatten().unsqueeze(1).view({-1, 2}); },
      {input({2, 3, 4})}));
}

// ---- in-place semantics ------------------------------------------------------------------------

TEST(ShapeGradTest, ModifyingASavedTensorInPlaceFailsBackward) {
  Tensor a = input({3});
  Tensor b = input({3});
  Tensor y = a * b;  // saves a and b
  {
    NoGradGuard no_grad;
    b.add_(1.0);
  }
  EXPECT_THAT(error_of([&] { y.backward(ones({3}, DType::Float64)); }), HasSubstr("modified by an in-place operation"));
}

TEST(ShapeGradTest, WritingThroughAViewBumpsTheSharedVersion) {
  Tensor a = input({3});
  Tensor b = input({3});
  Tensor y = a * b;
  {
    NoGradGuard no_grad;
    b.narrow(0, 2, 1).fill_(0.0);
  }
  EXPECT_THAT(error_of([&] { y.backward(ones({3}, DType::Float64)); }),
              HasSubstr("MulBackward: one of the tensors needed for gradient computation has been modified by an in-place "
                        "operation"));
}

TEST(ShapeGradTest, InPlaceOnALeafThatRequiresGradIsRefused) {
  Tensor a = input({3});
  EXPECT_THAT(error_of([&] { a.add_(1.0); }), HasSubstr("add_.Scalar: a leaf tensor that requires grad is being used in an in-place operation"));
  EXPECT_THAT(error_of([&] { a.copy_(zeros({3}, DType::Float64)); }), HasSubstr("a leaf tensor that requires grad"));
  {
    NoGradGuard no_grad;  // allowed without recording (how optimizers update parameters)
    a.add_(1.0);
  }
  EXPECT_DOUBLE_EQ(a.select(0, 0).item<double>(), std::sin(0.3) * 2.0 + 1.0);
}

TEST(ShapeGradTest, InPlaceOnAViewWithHistoryIsRefused) {
  Tensor a = input({4});
  Tensor y = a * 2.0;
  EXPECT_THAT(error_of([&] { y.narrow(0, 0, 2).mul_(3.0); }), HasSubstr("in-place operation on a view while autograd is recording"));
}

TEST(ShapeGradTest, InPlaceOnANonLeafGivesCorrectGradients) {
  Tensor a = from_vector<double>({1, 2, 3}).requires_grad_();
  Tensor b = from_vector<double>({4, 5, 6}).requires_grad_();
  Tensor c = from_vector<double>({2, -1, 0.5});
  Tensor y = a * 2.0;
  y.add_(b);
  EXPECT_EQ(y.grad_fn_name(), "AddBackward");
  EXPECT_FALSE(y.is_leaf());
  Tensor z = y * c;
  z.backward(ones({3}, DType::Float64));
  EXPECT_EQ(to_vector<double>(a.grad()), (std::vector<double>{4, -2, 1}));
  EXPECT_EQ(to_vector<double>(b.grad()), (std::vector<double>{2, -1, 0.5}));

  Tensor p = from_vector<double>({1, 2, 3}).requires_grad_();
  Tensor q = p * 1.0;
  q.mul_(p);  // q = p^2: the twin mul saved the pre-write value of q
  q.backward(ones({3}, DType::Float64));
  EXPECT_EQ(to_vector<double>(p.grad()), (std::vector<double>{2, 4, 6}));
}

TEST(ShapeGradTest, CopyIntoANonLeafIsDifferentiable) {
  Tensor a = from_vector<double>({1, 2, 3}).requires_grad_();
  Tensor s = from_vector<double>({5}).requires_grad_();
  Tensor y = a * 1.0;
  y.copy_(s * 2.0);  // broadcast (1,) → (3,)
  y.backward(from_vector<double>({1, 2, 3}));
  // y's old values do not reach the result: a gets no gradient (PyTorch: zeros).
  const std::vector<double> ga = a.grad().defined() ? to_vector<double>(a.grad()) : std::vector<double>(3, 0.0);
  EXPECT_EQ(ga, std::vector<double>(3, 0.0));
  EXPECT_EQ(to_vector<double>(s.grad()), (std::vector<double>{12}));
}

// ---- graph lifetime, accumulation, grad mode, leaves -------------------------------------------

TEST(ShapeGradTest, SecondBackwardWithoutRetainGraphFails) {
  Tensor a = input({3});
  Tensor b = input({3});
  Tensor y = a * b;
  y.backward(ones({3}, DType::Float64));
  EXPECT_THAT(error_of([&] { y.backward(ones({3}, DType::Float64)); }), HasSubstr("second time"));
}

TEST(ShapeGradTest, GradientsAccumulateAcrossBackwardCalls) {
  Tensor a = from_vector<double>({1, 2, 3}).requires_grad_();
  Tensor b = from_vector<double>({4, 5, 6}).requires_grad_();
  Tensor y = a * b;
  y.backward(ones({3}, DType::Float64), /*retain_graph=*/true);
  EXPECT_EQ(to_vector<double>(a.grad()), (std::vector<double>{4, 5, 6}));
  y.backward(from_vector<double>({1, 0, 2}));
  EXPECT_EQ(to_vector<double>(a.grad()), (std::vector<double>{8, 5, 18}));
  EXPECT_EQ(to_vector<double>(b.grad()), (std::vector<double>{2, 2, 9}));
}

TEST(ShapeGradTest, NoGradGuardStopsRecording) {
  Tensor a = input({3});
  {
    NoGradGuard no_grad;
    Tensor y = a.view({3, 1}) * 2.0;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(y.is_leaf());
    EXPECT_EQ(y.grad_fn_name(), "");
  }
  Tensor z = a.view({3, 1});
  EXPECT_TRUE(z.requires_grad());
  EXPECT_EQ(z.grad_fn_name(), "ViewBackward");
}

TEST(ShapeGradTest, LeavesAndNonLeaves) {
  Tensor a = input({3});
  EXPECT_TRUE(a.is_leaf());
  EXPECT_TRUE(zeros({3}).is_leaf());
  EXPECT_FALSE((a * 2.0).is_leaf());
  EXPECT_FALSE(a.view({3}).is_leaf());
  EXPECT_TRUE(a.detach().is_leaf());
}

TEST(ShapeGradTest, IntegerTensorsCannotRequireGrad) {
  EXPECT_THAT(error_of([] { from_vector<int64_t>({1, 2}).requires_grad_(); }),
              HasSubstr("requires_grad_: only floating point tensors can require gradients, got int64"));
  EXPECT_THAT(error_of([] { zeros({2}, DType::Bool).requires_grad_(); }), HasSubstr("got bool"));
}
