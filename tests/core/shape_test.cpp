// Views and copies (core/kernels/memory/shape.cpp, copy.cpp): storage sharing, sizes/strides/offsets,
// contiguity, reshape-vs-view, errors, dtype conversion, copy_ broadcasting, clone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qflow/qflow.h"
#include "error_of.h"

using namespace qflow;
using ::testing::HasSubstr;

namespace {

using ::qflow::testing_util::error_of;  // tests/error_of.h

using Sizes = std::vector<int64_t>;

// 0, 1, ..., n-1 as float32 in the given shape.
Tensor iota(const IntList& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
  return from_vector<float>(v, sizes);
}

bool same_storage(const Tensor& a, const Tensor& b) { return a.impl()->storage() == b.impl()->storage(); }

}  // namespace

TEST(ShapeTest, WritesThroughViewsAreVisibleInTheBase) {
  Tensor x = iota({2, 3});
  Tensor v = x.view({3, 2});
  ASSERT_TRUE(same_storage(x, v));
  v.select(0, 1).fill_(-1.0f);  // v[1] is x's flat elements 2 and 3
  EXPECT_EQ(to_vector<float>(x), (std::vector<float>{0, 1, -1, -1, 4, 5}));
  x.t().select(0, 2).fill_(9.0f);  // column 2 of x
  EXPECT_EQ(to_vector<float>(x), (std::vector<float>{0, 1, 9, -1, 4, 9}));
  Tensor s = x.slice(1, 0, std::nullopt, 2);
  s.zero_();
  EXPECT_EQ(to_vector<float>(x), (std::vector<float>{0, 1, 0, 0, 4, 0}));
}

TEST(ShapeTest, StridesAndOffsetsOfEachView) {
  Tensor x = iota({2, 3, 4});
  EXPECT_EQ(x.strides(), (Sizes{12, 4, 1}));
  auto geometry = [](const Tensor& t) { return std::make_tuple(t.sizes(), t.strides(), t.storage_offset()); };
  using G = std::tuple<Sizes, Sizes, int64_t>;
  EXPECT_EQ(geometry(x.permute({2, 0, 1})), (G{{4, 2, 3}, {1, 12, 4}, 0}));
  EXPECT_EQ(geometry(x.transpose(0, 2)), (G{{4, 3, 2}, {1, 4, 12}, 0}));
  EXPECT_EQ(geometry(x.narrow(2, 1, 2)), (G{{2, 3, 2}, {12, 4, 1}, 1}));
  EXPECT_EQ(geometry(x.slice(1, 0, 3, 2)), (G{{2, 2, 4}, {12, 8, 1}, 0}));
  EXPECT_EQ(geometry(x.select(1, -1)), (G{{2, 4}, {12, 1}, 8}));
  EXPECT_EQ(geometry(x.select(0, 1).select(0, 2)), (G{{4}, {1}, 20}));
  EXPECT_EQ(geometry(x.unsqueeze(1)), (G{{2, 1, 3, 4}, {12, 12, 4, 1}, 0}));
  EXPECT_EQ(geometry(x.unsqueeze(-1)), (G{{2, 3, 4, 1}, {12, 4, 1, 1}, 0}));
  EXPECT_EQ(geometry(x.narrow(0, 1, 1).squeeze(0)), (G{{3, 4}, {4, 1}, 12}));
  EXPECT_EQ(geometry(iota({3, 1}).expand({2, 3, 4})), (G{{2, 3, 4}, {0, 1, 0}, 0}));
  EXPECT_EQ(geometry(x.view({6, 4})), (G{{6, 4}, {4, 1}, 0}));
}

TEST(ShapeTest, TOnlyAcceptsUpTo2Dims) {
  EXPECT_THAT(error_of([] { iota({2, 3, 4}).t(); }), HasSubstr("t: expects a tensor with <= 2 dimensions, got shape [2, 3, 4]"));
  Tensor m = iota({2, 3});
  EXPECT_EQ(m.t().sizes(), (Sizes{3, 2}));
  EXPECT_EQ(m.t().strides(), (Sizes{1, 3}));
  EXPECT_EQ(iota({5}).t().sizes(), (Sizes{5}));
}

TEST(ShapeTest, IsContiguous) {
  Tensor x = iota({2, 3, 4});
  EXPECT_TRUE(x.is_contiguous());
  EXPECT_FALSE(x.transpose(0, 1).is_contiguous());
  EXPECT_TRUE(x.narrow(0, 1, 1).is_contiguous());
  EXPECT_FALSE(x.narrow(2, 0, 2).is_contiguous());
  EXPECT_FALSE(x.slice(1, 0, 3, 2).is_contiguous());
  EXPECT_TRUE(x.unsqueeze(0).is_contiguous());
  EXPECT_TRUE(x.select(0, 1).is_contiguous());
  EXPECT_FALSE(iota({3, 1}).expand({3, 4}).is_contiguous());
  EXPECT_TRUE(x.transpose(0, 1).contiguous().is_contiguous());
}

TEST(ShapeTest, EmptyTensorsAreContiguous) {
  // PyTorch: torch.empty(2, 0).is_contiguous() and its transpose are both True.
  Tensor e = zeros({2, 0});
  EXPECT_EQ(e.strides(), (Sizes{1, 1}));
  EXPECT_TRUE(e.is_contiguous());
  EXPECT_TRUE(e.transpose(0, 1).is_contiguous());
  EXPECT_TRUE(zeros({0, 3, 4}).narrow(2, 0, 2).is_contiguous());
  EXPECT_EQ(e.contiguous().numel(), 0);
}

TEST(ShapeTest, ViewErrors) {
  EXPECT_THAT(error_of([] { iota({2, 3}).t().view({6}); }),
              HasSubstr("view: shape [6] is not compatible with the input's size [3, 2] and stride [1, 3]"));
  EXPECT_THAT(error_of([] { iota({2, 3}).t().view({6}); }), HasSubstr("use reshape() instead"));
  EXPECT_THAT(error_of([] { iota({2, 3}).view({4, 2}); }),
              HasSubstr("view: shape [4, 2] is invalid for input of shape [2, 3] (6 elements)"));
  EXPECT_THAT(error_of([] { iota({2, 3}).view({-1, -1}); }),
              HasSubstr("view: only one dimension can be inferred (-1) in shape [-1, -1]"));
  EXPECT_THAT(error_of([] { iota({2, 3}).view({-2, 3}); }), HasSubstr("view: invalid dimension -2 in shape [-2, 3]"));
}

TEST(ShapeTest, ViewOfTransposedWorksWhenStridesAllowIt) {
  // (2, 3, 4) → transpose(0, 1) → (3, 2, 4); merging the last two dims is impossible, but
  // splitting the last one is fine.
  Tensor v = iota({2, 3, 4}).transpose(0, 1).view({3, 2, 2, 2});
  EXPECT_EQ(v.strides(), (Sizes{4, 12, 2, 1}));
}

TEST(ShapeTest, ViewsBetweenZeroDimAndOneElementShapes) {
  Tensor s = scalar_tensor(3.0);
  Tensor v = s.view({1, 1});
  EXPECT_EQ(v.sizes(), (Sizes{1, 1}));
  EXPECT_TRUE(same_storage(s, v));
  EXPECT_EQ(s.view({-1}).sizes(), (Sizes{1}));
  EXPECT_EQ(iota({1, 1}).view({}).dim(), 0);
  EXPECT_EQ(s.reshape({1}).item<double>(), 3.0);
}

TEST(ShapeTest, ReshapeCopiesOnlyWhenNeeded) {
  Tensor x = iota({2, 3});
  Tensor r = x.reshape({3, 2});
  EXPECT_TRUE(same_storage(x, r));
  Tensor c = x.t().reshape({6});
  EXPECT_FALSE(same_storage(x, c));
  EXPECT_EQ(to_vector<float>(c), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  Tensor e = iota({3, 1}).expand({3, 2}).reshape({6});
  EXPECT_EQ(to_vector<float>(e), (std::vector<float>{0, 0, 1, 1, 2, 2}));
  // Splitting a dim of a transposed tensor needs no copy.
  EXPECT_TRUE(same_storage(x, x.t().reshape({3, 2, 1})));
}

TEST(ShapeTest, MinusOneInference) {
  Tensor x = iota({2, 3, 4});
  EXPECT_EQ(x.view({-1}).sizes(), (Sizes{24}));
  EXPECT_EQ(x.view({4, -1}).sizes(), (Sizes{4, 6}));
  EXPECT_EQ(x.reshape({2, -1, 1, 2}).sizes(), (Sizes{2, 6, 1, 2}));
  EXPECT_EQ(zeros({0, 3}).reshape({-1, 3}).sizes(), (Sizes{0, 3}));
  EXPECT_THAT(error_of([&] { x.view({5, -1}); }), HasSubstr("view: shape [5, -1] is invalid for input of shape [2, 3, 4] (24 elements)"));
  EXPECT_THAT(error_of([] { zeros({0, 3}).reshape({0, -1}); }),
              HasSubstr("reshape: shape [0, -1] is invalid for input of shape [0, 3] (0 elements)"));
}

TEST(ShapeTest, SqueezeAndUnsqueezeWithNegativeDims) {
  Tensor x = iota({1, 3, 1, 2});
  EXPECT_EQ(x.squeeze().sizes(), (Sizes{3, 2}));
  EXPECT_EQ(x.squeeze(-2).sizes(), (Sizes{1, 3, 2}));
  EXPECT_EQ(x.squeeze(-4).sizes(), (Sizes{3, 1, 2}));
  EXPECT_EQ(x.squeeze(1).sizes(), (Sizes{1, 3, 1, 2}));  // size 3: left alone, like PyTorch
  Tensor y = iota({3, 2});
  EXPECT_EQ(y.unsqueeze(-1).sizes(), (Sizes{3, 2, 1}));
  EXPECT_EQ(y.unsqueeze(-3).sizes(), (Sizes{1, 3, 2}));
  EXPECT_EQ(y.unsqueeze(2).sizes(), (Sizes{3, 2, 1}));
  EXPECT_EQ(scalar_tensor(1.0).unsqueeze(0).sizes(), (Sizes{1}));
  EXPECT_EQ(iota({1}).squeeze().dim(), 0);
  EXPECT_THAT(error_of([&] { y.unsqueeze(3); }), HasSubstr("unsqueeze: dimension 3 out of range for a 3-d tensor (expected in [-3, 2])"));
  EXPECT_THAT(error_of([&] { x.squeeze(4); }), HasSubstr("squeeze: dimension 4 out of range for a 4-d tensor"));
}

TEST(ShapeTest, ExpandValuesAndErrors) {
  Tensor x = from_vector<float>({1, 2, 3}, {3, 1});
  Tensor e = x.expand({2, -1, 2});
  EXPECT_EQ(e.sizes(), (Sizes{2, 3, 2}));
  EXPECT_EQ(to_vector<float>(e), (std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(x.expand_as(zeros({3, 4})).sizes(), (Sizes{3, 4}));
  EXPECT_THAT(error_of([&] { x.expand({4, 2}); }),
              HasSubstr("expand: the expanded size of the tensor (4) must match the existing size (3) at non-singleton "
                        "dimension 0 (target shape [4, 2], tensor shape [3, 1])"));
  EXPECT_THAT(error_of([&] { x.expand({3}); }),
              HasSubstr("expand: the number of sizes provided (1) must be at least the number of dimensions of the tensor (2)"));
  EXPECT_THAT(error_of([&] { x.expand({-1, 3, 1}); }), HasSubstr("expand: size -1 at a new leading dimension 0 is invalid"));
}

TEST(ShapeTest, Flatten) {
  Tensor x = iota({2, 3, 4});
  EXPECT_EQ(x.flatten().sizes(), (Sizes{24}));
  EXPECT_EQ(x.flatten(1).sizes(), (Sizes{2, 12}));
  EXPECT_EQ(x.flatten(0, 1).sizes(), (Sizes{6, 4}));
  EXPECT_EQ(x.flatten(-2, -1).sizes(), (Sizes{2, 12}));
  EXPECT_EQ(x.flatten(1, 1).sizes(), (Sizes{2, 3, 4}));
  EXPECT_EQ(scalar_tensor(3.0).flatten().sizes(), (Sizes{1}));
  EXPECT_TRUE(same_storage(x, x.flatten()));
  Tensor f = x.transpose(0, 2).flatten();  // needs a copy
  EXPECT_FALSE(same_storage(x, f));
  EXPECT_EQ(to_vector<float>(f.narrow(0, 0, 4)), (std::vector<float>{0, 12, 4, 16}));
  EXPECT_THAT(error_of([&] { x.flatten(2, 1); }), HasSubstr("flatten: start_dim 2 must not come after end_dim 1"));
}

TEST(ShapeTest, SliceWithStepAndClamping) {
  Tensor x = iota({10});
  EXPECT_EQ(to_vector<float>(x.slice(0, 1, 8, 3)), (std::vector<float>{1, 4, 7}));
  EXPECT_EQ(to_vector<float>(x.slice(0, -3, std::nullopt)), (std::vector<float>{7, 8, 9}));
  EXPECT_EQ(to_vector<float>(x.slice(0, 8, 100)), (std::vector<float>{8, 9}));
  EXPECT_EQ(x.slice(0, 6, 2).sizes(), (Sizes{0}));
  EXPECT_EQ(to_vector<float>(x.slice(0, std::nullopt, std::nullopt, 4)), (std::vector<float>{0, 4, 8}));
  Tensor m = iota({3, 5});
  Tensor s = m.slice(1, 1, std::nullopt, 2);
  EXPECT_EQ(s.strides(), (Sizes{5, 2}));
  EXPECT_EQ(to_vector<float>(s), (std::vector<float>{1, 3, 6, 8, 11, 13}));
  EXPECT_THAT(error_of([&] { x.slice(0, 0, 5, 0); }), HasSubstr("slice: step must be positive, got 0"));
  EXPECT_THAT(error_of([&] { x.narrow(0, 8, 3); }), HasSubstr("narrow: start 8 + length 3 exceeds dimension 0 of size 10"));
  EXPECT_EQ(to_vector<float>(x.narrow(0, -2, 2)), (std::vector<float>{8, 9}));
}

TEST(ShapeTest, SelectWithNegativeIndex) {
  Tensor x = iota({2, 3});
  EXPECT_EQ(to_vector<float>(x.select(1, -1)), (std::vector<float>{2, 5}));
  EXPECT_EQ(to_vector<float>(x.select(-2, -2)), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(x.select(0, 1).select(0, 1).dim(), 0);
  EXPECT_EQ(x.select(0, 1).select(0, 1).item<float>(), 4.0f);
  EXPECT_THAT(error_of([&] { x.select(1, 3); }), HasSubstr("select: index 3 out of range for dimension 1 of size 3"));
  EXPECT_THAT(error_of([&] { x.select(1, -4); }), HasSubstr("select: index -4 out of range for dimension 1 of size 3"));
}

TEST(ShapeTest, PermuteErrors) {
  Tensor x = iota({2, 3, 4});
  EXPECT_THAT(error_of([&] { x.permute({0, 1}); }), HasSubstr("permute: got 2 dims [0, 1] for a 3-d tensor"));
  EXPECT_THAT(error_of([&] { x.permute({0, 1, -3}); }), HasSubstr("permute: dimension -3 appears twice"));
}

TEST(ShapeTest, ContiguousOfTransposedCopiesInRowMajorOrder) {
  Tensor x = iota({2, 3});
  Tensor c = x.t().contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_FALSE(same_storage(x, c));
  EXPECT_EQ(c.strides(), (Sizes{2, 1}));
  EXPECT_EQ(to_vector<float>(c), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_TRUE(same_storage(x, x.contiguous()));  // already contiguous: no copy
}

TEST(ShapeTest, ToConvertsBetweenAllSevenDtypes) {
  const DType all[] = {DType::Bool, DType::UInt8, DType::Int8, DType::Int32, DType::Int64, DType::Float32, DType::Float64};
  Tensor src = from_vector<int64_t>({0, 1, 2, 100});
  for (DType from : all) {
    Tensor x = src.to(from);
    ASSERT_EQ(x.dtype(), from);
    const std::vector<double> expect =
        from == DType::Bool ? std::vector<double>{0, 1, 1, 1} : std::vector<double>{0, 1, 2, 100};
    for (DType to : all) {
      Tensor y = x.to(to);
      ASSERT_EQ(y.dtype(), to);
      const std::vector<double> want = to == DType::Bool ? std::vector<double>{0, 1, 1, 1} : expect;
      EXPECT_EQ(to_vector<double>(y), want) << dtype_name(from) << " -> " << dtype_name(to);
    }
  }
}

TEST(ShapeTest, ToTruncatesFloatsTowardZeroLikePyTorch) {
  // torch.tensor([-2.7, -0.5, 0.0, 0.4, 2.5, 7.9]).to(torch.int8) → [-2, 0, 0, 0, 2, 7]
  Tensor x = from_vector<float>({-2.7f, -0.5f, 0.0f, 0.4f, 2.5f, 7.9f});
  EXPECT_EQ(to_vector<int8_t>(x.to(DType::Int8)), (std::vector<int8_t>{-2, 0, 0, 0, 2, 7}));
  EXPECT_EQ(to_vector<int64_t>(x.to(DType::Int64)), (std::vector<int64_t>{-2, 0, 0, 0, 2, 7}));
  EXPECT_EQ(to_vector<bool>(x.to(DType::Bool)), (std::vector<bool>{true, true, false, true, true, true}));
  EXPECT_EQ(to_vector<uint8_t>(from_vector<float>({0.9f, 255.0f}).to(DType::UInt8)), (std::vector<uint8_t>{0, 255}));
  // to() of a non-contiguous tensor gives a contiguous result in row-major order.
  Tensor t = iota({2, 3}).t().to(DType::Float64);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(to_vector<double>(t), (std::vector<double>{0, 3, 1, 4, 2, 5}));
}

TEST(ShapeTest, CopyBroadcastsAndConverts) {
  Tensor dst = zeros({2, 3});
  dst.copy_(from_vector<int64_t>({7, 8, 9}));
  EXPECT_EQ(to_vector<float>(dst), (std::vector<float>{7, 8, 9, 7, 8, 9}));
  dst.copy_(from_vector<double>({0.5, -1.5}, {2, 1}));
  EXPECT_EQ(to_vector<float>(dst), (std::vector<float>{0.5f, 0.5f, 0.5f, -1.5f, -1.5f, -1.5f}));
  // Into a strided view: only the view's elements change.
  Tensor base = zeros({3, 4}, DType::Int32);
  Tensor col = base.narrow(1, 1, 2);
  col.copy_(from_vector<float>({1.9f, -2.9f}));
  EXPECT_EQ(to_vector<int32_t>(base), (std::vector<int32_t>{0, 1, -2, 0, 0, 1, -2, 0, 0, 1, -2, 0}));
  // Overlapping source and destination in one storage read the old values.
  Tensor v = iota({5});
  Tensor head = v.narrow(0, 1, 4);
  head.copy_(v.narrow(0, 0, 4));
  EXPECT_EQ(to_vector<float>(v), (std::vector<float>{0, 0, 1, 2, 3}));
  EXPECT_THAT(error_of([&] { dst.copy_(zeros({4})); }), HasSubstr("copy_: shapes [2, 3] and [4] cannot be broadcast"));
  EXPECT_THAT(error_of([&] { dst.copy_(zeros({2, 2, 3})); }),
              HasSubstr("copy_: source of shape [2, 2, 3] cannot be broadcast to destination shape [2, 3]"));
}

TEST(ShapeTest, CopyAndFillBumpTheVersion) {
  Tensor x = zeros({3});
  const uint64_t v0 = x.version();
  x.fill_(1.0);
  EXPECT_GT(x.version(), v0);
  const uint64_t v1 = x.version();
  x.narrow(0, 0, 1).copy_(ones({1}));  // a view shares its base's counter
  EXPECT_GT(x.version(), v1);
}

TEST(ShapeTest, CloneIsIndependent) {
  Tensor x = iota({2, 3});
  Tensor c = x.clone();
  EXPECT_FALSE(same_storage(x, c));
  c.fill_(5.0f);
  EXPECT_EQ(to_vector<float>(x), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  x.zero_();
  EXPECT_EQ(to_vector<float>(c), std::vector<float>(6, 5.0f));
  Tensor ct = iota({2, 3}).t().clone();  // clone of a view: contiguous, same values
  EXPECT_TRUE(ct.is_contiguous());
  EXPECT_EQ(to_vector<float>(ct), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(ShapeTest, DetachSharesStorage) {
  Tensor x = iota({3});
  Tensor d = x.detach();
  EXPECT_TRUE(same_storage(x, d));
  d.fill_(2.0f);
  EXPECT_EQ(to_vector<float>(x), (std::vector<float>{2, 2, 2}));
}
