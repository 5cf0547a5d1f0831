// Reductions: hand values, PyTorch 1.13 goldens, keepdim shapes, negative dims, strided
// inputs, large-sum accuracy, thread-count independence and error messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "qflow/qflow.h"
#include "error_of.h"

using namespace qflow;

namespace {

using ::qflow::testing_util::error_of;  // tests/error_of.h

void expect_values(const Tensor& t, const std::vector<int64_t>& shape, const std::vector<double>& want, double tol = 1e-12) {
  ASSERT_EQ(t.sizes(), shape);
  const auto got = to_vector<double>(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isinf(want[i])) EXPECT_EQ(got[i], want[i]) << "element " << i;
    else EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << "element " << i;
  }
}

void expect_indices(const Tensor& t, const std::vector<int64_t>& shape, const std::vector<int64_t>& want) {
  EXPECT_EQ(t.dtype(), DType::Int64);
  EXPECT_EQ(t.sizes(), shape);
  EXPECT_EQ(to_vector<int64_t>(t), want);
}

// B[i] = 3 sin(i), shape (2, 3, 4), float64: the input of the PyTorch goldens below.
Tensor golden_input() {
  std::vector<double> v;
  for (int i = 0; i < 24; ++i) v.push_back(3 * std::sin(i));
  return from_vector(v, {2, 3, 4});
}

// A: (3, 4) float32 with exactly representable values.
Tensor small_input() {
  return from_vector<float>({0.5f, -1.25f, 2.0f, 3.5f, 1.5f, 0.25f, -0.75f, 4.0f, -2.0f, 1.0f, 0.0f, 2.5f}, {3, 4});
}

}  // namespace

// ---- sum / mean -------------------------------------------------------------------------------

TEST(ReduceTest, SumHandValues) {
  Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_values(sum(x), {}, {21});
  expect_values(sum(x, {0}), {3}, {5, 7, 9});
  expect_values(sum(x, {1}), {2}, {6, 15});
  expect_values(sum(x, {-1}, true), {2, 1}, {6, 15});
  expect_values(sum(x, {0, 1}, true), {1, 1}, {21});
  EXPECT_EQ(sum(x).dtype(), DType::Float32);
}

TEST(ReduceTest, SumOfIntegersAndBoolsIsInt64) {
  Tensor i = from_vector<int32_t>({1, 2, 3, 2147483647}, {2, 2});
  Tensor s = sum(i, {0});
  EXPECT_EQ(s.dtype(), DType::Int64);
  EXPECT_EQ(to_vector<int64_t>(s), (std::vector<int64_t>{4, 2147483649}));
  Tensor b = from_vector<bool>({true, false, true, true});
  EXPECT_EQ(sum(b).dtype(), DType::Int64);
  EXPECT_EQ(sum(b).item<int64_t>(), 3);
}

TEST(ReduceTest, SumMatchesPyTorchWithNegativeDimsAndKeepdim) {
  Tensor b = golden_input();
  expect_values(sum(b, {0, -1}), {3}, {10.249133203114916, -9.565699545313647, 2.2559837706695225});
  expect_values(sum(b, {1}, true), {2, 1, 4},
                {0.6976672539463609, 0.8839955861595439, 0.257582453212158, -0.6056507993161415, 0.26540704818638217,
                 0.8862755504494206, 0.6923063988983716, -0.13816606306530455});
  expect_values(mean(b, {0, 2}), {3}, {1.2811416503893645, -1.1957124431642059, 0.2819979713336903});
}

TEST(ReduceTest, SumOfTransposedAndSlicedInputs) {
  Tensor bt = golden_input().transpose(0, 2);  // (4, 3, 2), not contiguous
  ASSERT_FALSE(bt.is_contiguous());
  expect_values(sum(bt, {1}), {4, 2},
                {0.6976672539463609, 0.26540704818638217, 0.8839955861595439, 0.8862755504494206, 0.257582453212158,
                 0.6923063988983716, -0.6056507993161415, -0.13816606306530455});
  Tensor bs = golden_input().slice(1, 0, std::nullopt, 2).slice(2, 1, std::nullopt, 2);  // B[:, ::2, 1::2]
  expect_values(sum(bs, {-1}), {2, 2}, {2.947772978603291, -1.7636151639268405, 3.211364630951273, -0.02869429691734382});
}

TEST(ReduceTest, SumOfExpandedInputCountsEveryRepeat) {
  Tensor x = from_vector<float>({1, 2, 3}, {3, 1}).expand({3, 4});  // stride 0 along dim 1
  expect_values(sum(x, {1}), {3}, {4, 8, 12});
  expect_values(sum(x, {0}), {4}, {6, 6, 6, 6});
}

TEST(ReduceTest, ScalarAndEmptyInputs) {
  Tensor s = scalar_tensor(3.5);
  expect_values(sum(s), {}, {3.5});
  expect_values(sum(s, {0}), {}, {3.5});
  expect_values(sum(s, {-1}, true), {}, {3.5});
  expect_values(sum(zeros({0, 3}), {0}), {3}, {0, 0, 0});
  EXPECT_TRUE(std::isnan(mean(zeros({0})).item<double>()));
  EXPECT_EQ(sum(zeros({0, 3}), {1}).sizes(), (std::vector<int64_t>{0}));
}

// Ten million float32 elements: a float accumulator would drift to ~1.09e6.
TEST(ReduceTest, LargeFloatSumIsAccurate) {
  const int64_t n = 10'000'000;
  Tensor x = full({n}, 0.1f);
  EXPECT_FLOAT_EQ(sum(x).item<float>(), 1e6f);
  EXPECT_NEAR(mean(x).item<float>(), 0.1f, 1e-8);
  // Integer pattern with an exactly known total; the float result is its correct rounding.
  std::vector<float> v(n);
  double exact = 0;
  for (int64_t i = 0; i < n; ++i) exact += v[i] = static_cast<float>(i % 7) + 0.25f;
  EXPECT_EQ(sum(from_vector(v)).item<float>(), static_cast<float>(exact));
}

TEST(ReduceTest, LargeSumsAlongEachAxisAreAccurate) {
  Tensor x = full({1'000'000, 4}, 0.1f);
  expect_values(sum(x, {0}), {4}, {1e5, 1e5, 1e5, 1e5}, 1e-7);              // reduced dim outermost
  expect_values(sum(x.t(), {1}), {4}, {1e5, 1e5, 1e5, 1e5}, 1e-7);          // same memory, transposed
  expect_values(sum(full({4, 1'000'000}, 0.1f), {1}), {4}, {1e5, 1e5, 1e5, 1e5}, 1e-7);
  expect_values(mean(full({3000, 3000}, 0.5), {1}).slice(0, 0, 3), {3}, {0.5, 0.5, 0.5});
}

TEST(ReduceTest, ResultsDoNotDependOnThreadCount) {
  Tensor x = randn({1 << 20});
  Tensor m = randn({4096, 300});
  const int saved = num_threads();
  set_num_threads(1);
  const float one_thread = sum(x).item<float>();
  const auto rows1 = to_vector<float>(sum(m, {0}));
  const auto cols1 = to_vector<float>(var(m, {1}));
  set_num_threads(4);
  const float many = sum(x).item<float>();
  const auto rows4 = to_vector<float>(sum(m, {0}));
  const auto cols4 = to_vector<float>(var(m, {1}));
  set_num_threads(saved);
  EXPECT_EQ(one_thread, many);
  EXPECT_EQ(rows1, rows4);
  EXPECT_EQ(cols1, cols4);
}

TEST(ReduceTest, MeanRejectsIntegers) {
  EXPECT_THAT(error_of([] { mean(from_vector<int64_t>({1, 2})); }),
              ::testing::HasSubstr("mean: expected a floating point input, got int64"));
}

namespace {

// Naive reference of a reduction of `x` (any layout) over `dims`: elements visited in logical
// row-major order, outputs in the kept dims' row-major order.
struct Reference {
  std::vector<double> sum, max;
  std::vector<int64_t> argmax;  // position within the reduced dims (row-major)
};

Reference reference(const Tensor& x, const std::vector<int64_t>& dims) {
  const auto v = to_vector<double>(x);
  const auto& sizes = x.sizes();
  std::vector<bool> red(sizes.size(), false);
  for (int64_t d : dims) red[d] = true;
  int64_t n_out = 1;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (!red[d]) n_out *= sizes[d];
  Reference r{std::vector<double>(n_out, 0.0), std::vector<double>(n_out, -INFINITY), std::vector<int64_t>(n_out, 0)};
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t rest = static_cast<int64_t>(i), out = 0, pos = 0, out_scale = 1, pos_scale = 1;
    for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
      const int64_t idx = rest % sizes[d];
      rest /= sizes[d];
      if (red[d]) {
        pos += idx * pos_scale;
        pos_scale *= sizes[d];
      } else {
        out += idx * out_scale;
        out_scale *= sizes[d];
      }
    }
    r.sum[out] += v[i];
    if (v[i] > r.max[out]) {
      r.max[out] = v[i];
      r.argmax[out] = pos;
    }
  }
  return r;
}

// Small integers keep float sums exact; repeats exercise the first-index rule.
Tensor pattern(const IntList& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7919) % 13) - 6.0f;
  return from_vector(v, sizes);
}

}  // namespace

// Every schedule (horizontal, vertical, split, split with kept dims between reduced ones)
// and layout (contiguous, permuted, sliced) against the naive reference.
TEST(ReduceTest, MatchesNaiveReferenceOnManyLayouts) {
  struct Case {
    Tensor x;
    std::vector<int64_t> dims;
  };
  const std::vector<Case> cases = {
      {pattern({3, 5, 600}), {1}},                                   // vertical, several blocks
      {pattern({3, 5, 600}), {0, 2}},                                // horizontal, 2 reduced dims
      {pattern({128, 8, 32, 32}), {0, 2, 3}},                        // split, C kept between reduced
      {pattern({128, 8, 32, 32}), {0}},                              // vertical, many outputs
      {pattern({70000, 3}), {0}},                                    // split, too narrow for vertical
      {pattern({70000, 8}), {0}},                                    // split and vertical
      {pattern({300, 400}).t(), {0}},                                // transposed
      {pattern({300, 400}).t(), {0, 1}},                             // everything, transposed
      {pattern({40, 30, 20}).permute({2, 0, 1}), {1}},               // permuted
      {pattern({40, 30, 20}).slice(1, 1, std::nullopt, 3), {0, 2}},  // sliced
      {pattern({2, 140000}).slice(1, 0, std::nullopt, 2), {1}},      // strided rows, split
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("shape {} strides {} dims {}", c.x.sizes(), c.x.strides(), c.dims));
    const Reference ref = reference(c.x, c.dims);
    EXPECT_EQ(to_vector<double>(sum(c.x, c.dims)), ref.sum);
    EXPECT_EQ(to_vector<double>(amax(c.x, c.dims)), ref.max);
    if (c.dims.size() == 1) {
      auto [values, indices] = max(c.x, c.dims[0]);
      EXPECT_EQ(to_vector<double>(values), ref.max);
      EXPECT_EQ(to_vector<int64_t>(indices), ref.argmax);
    }
    if (c.dims.size() == static_cast<size_t>(c.x.dim())) {
      EXPECT_EQ(argmax(c.x).item<int64_t>(), ref.argmax[0]);
    }
  }
}

// ---- var / std --------------------------------------------------------------------------------

TEST(ReduceTest, VarAndStdMatchPyTorch) {
  Tensor b = golden_input();
  expect_values(var(b, {1}), {2, 4},
                {6.900985640592152, 7.958287363045648, 5.392783980681088, 6.470734491671604, 5.407465160865196,
                 7.97276754319564, 6.874252698083941, 5.223237271140112});
  expect_values(var(b, {0, 2}, /*unbiased=*/false, /*keepdim=*/true), {1, 3, 1},
                {2.2100439664930285, 2.6153315102764414, 5.201496890778948});
  expect_values(qflow::std(b, {-1}), {2, 3},
                {1.407124341241015, 2.1593923062180735, 2.7052902291486327, 1.9654092136790566, 1.487561836194939,
                 2.479667353608346});
  expect_values(qflow::std(b), {}, {2.1372429609374346});
  expect_values(var(golden_input().transpose(0, 2), {0, 1}), {2}, {4.898716952016021, 4.651308525219981});
}

TEST(ReduceTest, VarOfFloat32HandValues) {
  Tensor a = small_input();
  expect_values(var(a), {}, {3.421875}, 1e-7);
  expect_values(qflow::std(a, {0}), {4}, {1.8027756214141846, 1.145643949508667, 1.4215601682662964, 0.7637625932693481}, 1e-6);
}

// Values near 1e4 in float32: a one-pass sum of squares loses every digit of this variance.
TEST(ReduceTest, VarIsAccurateWithLargeOffset) {
  Tensor x = from_vector<float>({1e4f + 0.5f, 1e4f + 0.25f, 1e4f - 0.75f, 1e4f + 1.0f});
  EXPECT_FLOAT_EQ(var(x).item<float>(), 0.5416666865348816f);
}

TEST(ReduceTest, VarOfOneElementIsNaNUnbiasedAndZeroBiased) {
  Tensor x = from_vector<double>({2.0});
  EXPECT_TRUE(std::isnan(var(x).item<double>()));
  EXPECT_EQ(var(x, {}, /*unbiased=*/false).item<double>(), 0.0);
  EXPECT_EQ(qflow::std(x, {0}, true, true).sizes(), (std::vector<int64_t>{1}));
}

TEST(ReduceTest, VarRejectsIntegers) {
  EXPECT_THAT(error_of([] { var(from_vector<int32_t>({1, 2})); }),
              ::testing::HasSubstr("var: expected a floating point input, got int32"));
  EXPECT_THAT(error_of([] { qflow::std(from_vector<bool>({true})); }), ::testing::HasSubstr("std: expected a floating point input"));
}

// ---- max / min / argmax / amax ----------------------------------------------------------------

TEST(ReduceTest, MaxAndMinOfEverything) {
  Tensor a = small_input();
  EXPECT_EQ(max(a).item<float>(), 4.0f);
  EXPECT_EQ(min(a).item<float>(), -2.0f);
  EXPECT_EQ(max(a).sizes(), (std::vector<int64_t>{}));
  EXPECT_EQ(max(from_vector<int64_t>({-5, 7, 3})).item<int64_t>(), 7);
  EXPECT_EQ(min(from_vector<bool>({true, false})).item<bool>(), false);
  EXPECT_EQ(max(a.t()).item<float>(), 4.0f);
}

TEST(ReduceTest, MaxPropagatesNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = from_vector<float>({1, nan, 3, nan});
  EXPECT_TRUE(std::isnan(max(x).item<float>()));
  EXPECT_TRUE(std::isnan(amin(x).item<float>()));
  auto [v, i] = max(x, 0);
  EXPECT_TRUE(std::isnan(v.item<float>()));
  EXPECT_EQ(i.item<int64_t>(), 1);  // the first NaN, like PyTorch
  EXPECT_EQ(argmin(x).item<int64_t>(), 1);
}

TEST(ReduceTest, MaxDimReturnsValuesAndFirstIndexOnTies) {
  Tensor x = from_vector<float>({1, 3, 3, 2, 2, 1}, {2, 3});
  auto [v, i] = max(x, 1);
  expect_values(v, {2}, {3, 2});
  expect_indices(i, {2}, {1, 0});
  auto [mv, mi] = min(x, -1, /*keepdim=*/true);
  expect_values(mv, {2, 1}, {1, 1});
  expect_indices(mi, {2, 1}, {0, 2});
}

// Reduced dim outermost with many columns: the column-blocked (vertical) schedule.
TEST(ReduceTest, MaxDimOverRowsKeepsFirstTieInEveryColumn) {
  std::vector<float> v(6 * 10);
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 10; ++c) v[r * 10 + c] = static_cast<float>((r * 7 + c) % 4);  // max 3 appears repeatedly
  auto [val, idx] = max(from_vector(v, {6, 10}), 0);
  std::vector<int64_t> want;
  for (int c = 0; c < 10; ++c) {
    int64_t first = -1;
    for (int r = 0; r < 6 && first < 0; ++r)
      if ((r * 7 + c) % 4 == 3) first = r;
    want.push_back(first);
  }
  expect_values(val, {10}, std::vector<double>(10, 3.0));
  expect_indices(idx, {10}, want);
}

TEST(ReduceTest, MaxMinDimMatchPyTorch) {
  Tensor b = golden_input();
  auto [v, i] = max(b, 1);
  expect_values(v, {2, 4},
                {2.9680747398701453, 2.5244129544236893, 2.727892280477045, 1.9709597961563672, 2.738835752182883,
                 2.5099669156081683, 2.971822067084611, 1.9508635204713505});
  expect_indices(i, {2, 4}, {2, 0, 0, 1, 2, 2, 0, 0});
  auto [mv, mi] = min(b, -1, true);
  expect_values(mv, {2, 3, 1},
                {0.0, -2.8767728239894153, -2.9999706196521103, -1.609718754001305, -2.8841924756386703, -2.538661212525512});
  expect_indices(mi, {2, 3, 1}, {0, 1, 3, 0, 1, 3});
}

TEST(ReduceTest, ArgmaxArgminMatchPyTorch) {
  Tensor b = golden_input();
  expect_indices(argmax(b), {}, {14});
  expect_indices(argmin(b), {}, {11});
  expect_indices(argmax(b, std::nullopt, true), {1, 1, 1}, {14});
  Tensor bt = b.transpose(0, 2);  // flat positions count in bt's own (logical) order
  expect_indices(argmax(bt), {}, {13});
  expect_indices(argmin(bt, 0), {3, 2}, {0, 0, 1, 1, 3, 3});
  expect_indices(argmax(bt, -1, true), {4, 3, 1}, {0, 1, 0, 0, 0, 1, 1, 0, 1, 1, 0, 1});
  expect_indices(argmax(from_vector<int32_t>({4, 9, 9, 1})), {}, {1});
}

// A million elements: the split (parallel partials) schedule must still report the first tie.
TEST(ReduceTest, ArgmaxOfLargeTensorReportsFirstTie) {
  const int64_t n = 1'000'000;
  std::vector<float> v(n, 0.0f);
  v[700'001] = 5.0f;
  v[123'456] = 5.0f;
  v[999'999] = 5.0f;
  v[400'000] = -1.0f;
  Tensor x = from_vector(v);
  EXPECT_EQ(argmax(x).item<int64_t>(), 123'456);
  EXPECT_EQ(argmin(x).item<int64_t>(), 400'000);
  EXPECT_EQ(argmin(full({n}, 2.0f)).item<int64_t>(), 0);
  auto [mv, mi] = max(x.view({1000, 1000}), 0);
  EXPECT_EQ(to_vector<int64_t>(mi)[456], 123);
  EXPECT_EQ(to_vector<float>(mv)[456], 5.0f);
}

TEST(ReduceTest, AmaxAminMatchPyTorch) {
  Tensor b = golden_input();
  expect_values(amax(b, {0, 2}), {3}, {2.971822067084611, 1.9709597961563672, 2.9680747398701453});
  expect_values(amin(b, {1}, true), {2, 1, 4},
                {-2.2704074859237844, -2.8767728239894153, -1.6320633326681093, -2.9999706196521103, -1.609718754001305,
                 -2.8841924756386703, -2.252961740315028, -2.538661212525512});
  Tensor bs = b.slice(1, 0, std::nullopt, 2).slice(2, 1, std::nullopt, 2);
  expect_values(amax(bs, {0}), {2, 2}, {2.5244129544236893, 1.9508635204713505, 2.5099669156081683, -2.538661212525512});
  expect_values(amax(b), {}, {2.971822067084611});
  Tensor ints = from_vector<int64_t>({3, -8, 5, 1}, {2, 2});
  EXPECT_EQ(to_vector<int64_t>(amin(ints, {1})), (std::vector<int64_t>{-8, 1}));
}

TEST(ReduceTest, EmptyReductionsOfMaxFamilyAreErrors) {
  Tensor e = zeros({0, 3});
  EXPECT_THAT(error_of([&] { max(e); }),
              ::testing::HasSubstr("max: cannot reduce an empty tensor of shape [0, 3] over all dimensions"));
  EXPECT_THAT(error_of([&] { min(e); }), ::testing::HasSubstr("min: cannot reduce an empty tensor"));
  EXPECT_THAT(error_of([&] { argmax(e); }), ::testing::HasSubstr("argmax: cannot reduce an empty tensor"));
  EXPECT_THAT(error_of([&] { max(e, 0); }),
              ::testing::HasSubstr("max: cannot reduce over dimension 0 of size 0 (input shape [0, 3])"));
  EXPECT_THAT(error_of([&] { amax(e, {0}); }), ::testing::HasSubstr("amax: cannot reduce over dimension 0 of size 0"));
  // Reducing the non-empty dim of an empty tensor is fine: there is nothing to output.
  EXPECT_EQ(amax(e, {1}).sizes(), (std::vector<int64_t>{0}));
  auto [v, i] = max(e, 1);
  EXPECT_EQ(i.sizes(), (std::vector<int64_t>{0}));
}

// ---- logsumexp --------------------------------------------------------------------------------

TEST(ReduceTest, LogsumexpMatchesPyTorch) {
  Tensor b = golden_input();
  expect_values(logsumexp(b, {1}), {2, 4},
                {3.023235506902396, 2.7715208493603396, 2.7681160815020642, 2.169560394298423, 2.7782292731332165,
                 2.76553965041407, 3.025599310113725, 2.1611904365812338});
  expect_values(logsumexp(b, {0, 2}, true), {1, 3, 1}, {4.104304989939518, 2.294546244037094, 3.9506481688928328});
  Tensor bs = b.slice(1, 0, std::nullopt, 2).slice(2, 1, std::nullopt, 2);
  expect_values(logsumexp(bs, {0, 1}), {2}, {3.4581546898616873, 2.162242463748399});
  expect_values(logsumexp(small_input(), {1}), {3}, {3.7480850219726562, 4.108185768127441, 2.774843215942383}, 1e-6);
}

TEST(ReduceTest, LogsumexpIsStableAndHandlesInfinities) {
  const double inf = std::numeric_limits<double>::infinity();
  expect_values(logsumexp(from_vector<double>({1000, 1000}), {0}), {}, {1000 + std::log(2.0)});
  expect_values(logsumexp(from_vector<float>({-1000, -1000}), {0}), {}, {-1000 + std::log(2.0)}, 1e-6);
  EXPECT_EQ(logsumexp(from_vector<double>({-inf, -inf}), {0}).item<double>(), -inf);
  EXPECT_EQ(logsumexp(from_vector<double>({inf, 1.0}), {0}).item<double>(), inf);
  expect_values(logsumexp(from_vector<double>({-inf, 0.0}), {0}), {}, {0.0});
  expect_values(logsumexp(zeros({0, 3}), {0}), {3}, {-inf, -inf, -inf});
}

TEST(ReduceTest, LogsumexpOfIntegersIsFloat32) {
  Tensor r = logsumexp(from_vector<int64_t>({1, 2, 3, 4}, {2, 2}), {1});
  EXPECT_EQ(r.dtype(), DType::Float32);
  expect_values(r, {2}, {2.3132617473602295, 4.31326150894165}, 1e-6);
}

// ---- sum_to -----------------------------------------------------------------------------------

TEST(ReduceTest, SumToUndoesBroadcasting) {
  Tensor b = golden_input();
  expect_values(sum_to(b, {3, 1}), {3, 1}, {10.249133203114916, -9.565699545313647, 2.2559837706695225});
  expect_values(sum_to(b, {1, 3, 4}), {1, 3, 4},
                {-1.609718754001305, 3.784914064903612, 5.699714347561656, 2.374223544650952, -3.1341174359189803,
                 -5.760965299628086, -3.0912082349118055, 2.4205914251452243, 5.706910492053028, 3.746322371333438,
                 -1.658617260539321, -5.5386318321776224});
  expect_values(sum_to(b, {}), {}, {to_vector<double>(sum(b))[0]});
  Tensor bias_grad = sum_to(full({64, 10}, 0.5f), {10});
  expect_values(bias_grad, {10}, std::vector<double>(10, 32.0));
  EXPECT_EQ(bias_grad.dtype(), DType::Float32);
}

TEST(ReduceTest, SumToSameShapeReturnsSelf) {
  Tensor b = golden_input();
  EXPECT_TRUE(sum_to(b, {2, 3, 4}).is_same(b));
  Stack r = call_op("sum_to", {b, IntList{2, 3, 4}});
  EXPECT_TRUE(r[0].tensor().is_same(b));
}

TEST(ReduceTest, SumToKeepsIntegerDtype) {
  Tensor x = from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor s = sum_to(x, {1, 3});
  EXPECT_EQ(s.dtype(), DType::Int32);
  EXPECT_EQ(to_vector<int32_t>(s), (std::vector<int32_t>{5, 7, 9}));
}

TEST(ReduceTest, SumToRejectsShapesThatDoNotBroadcast) {
  Tensor x = ones({2, 3});
  EXPECT_THAT(error_of([&] { sum_to(x, {2}); }),
              ::testing::HasSubstr("sum_to: a tensor of shape [2, 3] cannot be summed to shape [2] (dimension 1: 3 vs 2)"));
  EXPECT_THAT(error_of([&] { sum_to(x, {1, 2, 3}); }),
              ::testing::HasSubstr("sum_to: a tensor of shape [2, 3] cannot be summed to the larger rank shape [1, 2, 3]"));
}

// ---- dims -------------------------------------------------------------------------------------

TEST(ReduceTest, BadDimsNameTheOpAndRange) {
  Tensor x = ones({2, 3});
  EXPECT_THAT(error_of([&] { sum(x, {2}); }),
              ::testing::HasSubstr("sum: dimension 2 out of range for a 2-d tensor (expected in [-2, 1])"));
  EXPECT_THAT(error_of([&] { mean(x, {-3}); }), ::testing::HasSubstr("mean: dimension -3 out of range"));
  EXPECT_THAT(error_of([&] { sum(x, {0, -2}); }), ::testing::HasSubstr("sum: dimension -2 appears twice in [0, -2]"));
  EXPECT_THAT(error_of([&] { max(x, 5); }), ::testing::HasSubstr("max: dimension 5 out of range"));
  EXPECT_THAT(error_of([&] { argmin(x, -3); }), ::testing::HasSubstr("argmin: dimension -3 out of range"));
  EXPECT_THAT(error_of([&] { logsumexp(x, {4}); }), ::testing::HasSubstr("logsumexp: dimension 4 out of range"));
}

TEST(ReduceTest, TensorMethodsCallTheSameOps) {
  Tensor a = small_input();
  EXPECT_EQ(to_vector<float>(a.sum({0})), to_vector<float>(sum(a, {0})));
  EXPECT_EQ(a.amax().item<float>(), 4.0f);
  EXPECT_EQ(a.argmin().item<int64_t>(), 8);
  auto [v, i] = a.max(0);
  EXPECT_EQ(to_vector<int64_t>(i), (std::vector<int64_t>{1, 2, 0, 1}));
}
