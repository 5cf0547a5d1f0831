// Negative controls of the comparison helpers every layer's tests share (tests/compare.h,
// tests/test_helpers.h): fed a NaN or an Inf where the reference is finite, each one fails.
// A comparison that a NaN passes would let a kernel writing NaN pass every test built on it.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "compare.h"
#include "relative_error.h"
#include "test_helpers.h"

using namespace qflow;
using namespace qflow::testing_util;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor values(std::vector<double> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return from_vector<double>(v, {n});
}

// How many failures `fn` reports (intercepted: they do not fail this test).
int failures_of(const std::function<void()>& fn) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    fn();
  }
  return results.size();
}

}  // namespace

TEST(ComparisonHelpersTest, CloseEnoughRejectsNaNAndInfAgainstAFiniteReference) {
  EXPECT_TRUE(close_enough(1.0, 1.0, 0, 0));
  EXPECT_TRUE(close_enough(1.0 + 1e-7, 1.0, 1e-6, 0));
  EXPECT_FALSE(close_enough(1.1, 1.0, 1e-6, 1e-6));
  for (NonFinite mode : {NonFinite::kFail, NonFinite::kMustMatch}) {
    EXPECT_FALSE(close_enough(kNaN, 1.0, 1e9, 1e9, mode));
    EXPECT_FALSE(close_enough(kInf, 1.0, 1e9, 1e9, mode));
    EXPECT_FALSE(close_enough(-kInf, 0.0, 1e9, 1e9, mode));
  }
}

TEST(ComparisonHelpersTest, NonFiniteReferencesMatchOnlyWhereIntended) {
  // A computed reference (the default): NaN or Inf fails even when both sides agree on it.
  EXPECT_FALSE(close_enough(kNaN, kNaN, 1, 1));
  EXPECT_FALSE(close_enough(kInf, kInf, 1, 1));
  // A written-down reference: its NaN or Inf must be reproduced, exactly.
  EXPECT_TRUE(close_enough(kNaN, kNaN, 0, 0, NonFinite::kMustMatch));
  EXPECT_TRUE(close_enough(-kInf, -kInf, 0, 0, NonFinite::kMustMatch));
  EXPECT_FALSE(close_enough(kInf, -kInf, 1, 1, NonFinite::kMustMatch));
  EXPECT_FALSE(close_enough(1.0, kNaN, 1, 1, NonFinite::kMustMatch));
  EXPECT_FALSE(close_enough(kNaN, kInf, 1, 1, NonFinite::kMustMatch));
}

TEST(ComparisonHelpersTest, RelativeErrorIsInfiniteOnNaNOrInfOnEitherSide) {
  const Tensor want = values({1, 2, 3});
  EXPECT_EQ(relative_error(values({1, 2, 3}), want), 0.0);
  EXPECT_NEAR(relative_error(values({1, 2, 3.3}), want), 0.1, 1e-12);
  EXPECT_EQ(relative_error(values({1, kNaN, 3}), want), kInf);
  EXPECT_EQ(relative_error(values({kNaN, kNaN, kNaN}), want), kInf);  // all-NaN once scored 0
  EXPECT_EQ(relative_error(values({1, kInf, 3}), want), kInf);
  EXPECT_EQ(relative_error(values({1, 2, 3}), values({1, kNaN, 3})), kInf);
  EXPECT_EQ(relative_error(values({kNaN}), values({kNaN})), kInf);
  EXPECT_EQ(relative_error(values({1, 2}), want), kInf);  // sizes differ
  EXPECT_EQ(relative_error(from_vector<float>({std::numeric_limits<float>::quiet_NaN()}), values({0})), kInf);
  // The way tests use it fails.
  EXPECT_NONFATAL_FAILURE(EXPECT_LE(relative_error(values({kNaN, 2, 3}), values({1, 2, 3})), 1e-5), "relative_error");
}

TEST(ComparisonHelpersTest, CosineDistanceSeesTheDirectionNotALocalDifference) {
  const Tensor want = values({1, 2, 3, 4});
  EXPECT_NEAR(cosine_distance(values({2, 4, 6, 8}), want), 0.0, 1e-12);  // a scale keeps the direction
  EXPECT_NEAR(cosine_distance(values({-1, -2, -3, -4}), want), 2.0, 1e-12);
  EXPECT_NEAR(cosine_distance(values({-2, 1, -4, 3}), want), 1.0, 1e-12);  // orthogonal: a permuted layout
  // One element of four wrong by 25% of the largest: relative_error reports it in full, the
  // direction hardly moves (1 - 34 / sqrt(30 * 39) = 0.0044).
  EXPECT_NEAR(relative_error(values({1, 2, 3, 5}), want), 0.25, 1e-12);
  EXPECT_NEAR(cosine_distance(values({1, 2, 3, 5}), want), 1 - 34 / std::sqrt(30.0 * 39.0), 1e-12);
  EXPECT_EQ(cosine_distance(values({0, 0, 0, 0}), values({0, 0, 0, 0})), 0.0);
  EXPECT_EQ(cosine_distance(values({0, 0, 0, 0}), want), kInf);
  EXPECT_EQ(cosine_distance(values({1, kNaN, 3, 4}), want), kInf);
  EXPECT_EQ(cosine_distance(values({1, 2}), want), kInf);  // sizes differ
  EXPECT_EQ(cosine_distance(Tensor(), want), kInf);
}

TEST(ComparisonHelpersTest, ExpectAllCloseFailsOnNaNAndInf) {
  expect_all_close(values({1, 2}), values({1, 2}), 0, 0);  // passes
  EXPECT_NONFATAL_FAILURE(expect_all_close(values({1, kNaN}), values({1, 2}), 1, 1), "element 1: got nan");
  EXPECT_NONFATAL_FAILURE(expect_all_close(values({kInf, 2}), values({1, 2}), 1, 1), "element 0: got inf");
  EXPECT_NONFATAL_FAILURE(expect_all_close(values({kNaN}), values({kNaN}), 1, 1), "element 0");
  EXPECT_NONFATAL_FAILURE(expect_all_close(values({1, 2}), values({1, 2, 3}), 1, 1), "sizes 2, want 3");
  EXPECT_NONFATAL_FAILURE(expect_all_close(std::vector<double>{kNaN}, std::vector<double>{0.0}, 1, 1,
                                           NonFinite::kMustMatch, "what"),
                          "what element 0");
  // Many misses: the first five in full, then the count.
  EXPECT_EQ(failures_of([] { expect_all_close(std::vector<double>(8, kNaN), std::vector<double>(8, 0.0), 1, 1); }), 6);
}

TEST(ComparisonHelpersTest, TestHelpersExpectCloseFailsOnNaNAndInf) {
  expect_close(values({1, 2}), std::vector<double>{1, 2});
  EXPECT_FATAL_FAILURE(expect_close(from_vector<double>({1, kNaN}, {2}), std::vector<double>{1, 2}), "element 1");
  EXPECT_FATAL_FAILURE(expect_close(from_vector<double>({kInf}, {1}), std::vector<double>{1}), "element 0");
  expect_close(values({1, 2}), {2}, std::vector<double>{1, 2});
  EXPECT_FATAL_FAILURE(expect_close(from_vector<double>({kNaN, 2}, {2}), {2}, std::vector<double>{1, 2}), "element 0");
  EXPECT_FATAL_FAILURE(expect_close(from_vector<double>({-kInf, 2}, {2}), {2}, std::vector<double>{1, 2}), "element 0");
  expect_close_abs_below_one(values({0.5, 2}), {2}, {0.5, 2});
  EXPECT_NONFATAL_FAILURE(expect_close_abs_below_one(from_vector<double>({kNaN, 2}, {2}), {2}, {0.5, 2}), "at 0");
  EXPECT_NONFATAL_FAILURE(expect_close_abs_below_one(from_vector<double>({0.5, kInf}, {2}), {2}, {0.5, 2}), "at 1");
  // Written-down non-finite values are matched (logsumexp over an empty dimension is -inf).
  expect_close(values({-kInf, kNaN}), std::vector<double>{-kInf, kNaN});
  EXPECT_FATAL_FAILURE(expect_close(from_vector<double>({kInf}, {1}), std::vector<double>{-kInf}), "element 0");
}
