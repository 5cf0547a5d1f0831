// Negative control of nn_golden::expect_close (tests/nn/golden_util.h), which every nn and
// training golden against PyTorch stands on: a NaN or an Inf where PyTorch's value is finite
// fails it.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <functional>
#include <limits>

#include "nn/golden_util.h"

using namespace qflow;

namespace {

const nn_golden::Golden kWant{{3}, {0.5f, -1.0f, 2.0f}};

Tensor got(float a, float b, float c) { return from_vector<float>({a, b, c}, {3}); }

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

TEST(GoldenUtilTest, ExpectCloseFailsOnNaNAndInf) {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
  nn_golden::expect_close(got(0.5f, -1.0f, 2.0f), kWant);  // passes
  EXPECT_NONFATAL_FAILURE(nn_golden::expect_close(got(0.5f, kNaN, 2.0f), kWant, 1e-5, 1e-6, "out"),
                          "out element 1: got nan");
  EXPECT_EQ(failures_of([] { nn_golden::expect_close(got(kNaN, kNaN, kNaN), kWant); }), 3);  // all-NaN: every element
  EXPECT_NONFATAL_FAILURE(nn_golden::expect_close(got(0.5f, -1.0f, kInf), kWant), "element 2: got inf");
  EXPECT_NONFATAL_FAILURE(nn_golden::expect_close(got(-kInf, -1.0f, 2.0f), kWant, 1e3, 1e3), "element 0: got -inf");
  EXPECT_NONFATAL_FAILURE(nn_golden::expect_close(got(0.5f, -1.1f, 2.0f), kWant), "element 1");  // and a plain miss
}
