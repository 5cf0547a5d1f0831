#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>

#include "qflow/qflow.h"
#include "error_of.h"

using namespace qflow;
using ::testing::HasSubstr;

namespace {

using Words = std::array<uint32_t, 4>;

using qflow::testing_util::error_of;

struct Moments {
  double mean = 0, std = 0;
};
Moments moments(const std::vector<double>& v) {
  Moments m;
  for (double x : v) m.mean += x;
  m.mean /= static_cast<double>(v.size());
  for (double x : v) m.std += (x - m.mean) * (x - m.mean);
  m.std = std::sqrt(m.std / static_cast<double>(v.size() - 1));
  return m;
}

// Restores the thread setting a test changed.
class ThreadCountGuard {
 public:
  ThreadCountGuard() : saved_(num_threads()) {}
  ~ThreadCountGuard() { set_num_threads(saved_); }

 private:
  int saved_;
};

}  // namespace

// ---- Philox ----------------------------------------------------------------------------------

// Random123's kat_vectors, the three "philox4x32 10" lines (counter, key -> output).
TEST(PhiloxTest, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(philox4x32({0, 0, 0, 0}, {0, 0}), (Words{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (Words{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (Words{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(PhiloxTest, GeneratorBlockIsPhiloxOfIndexAndSeed) {
  const Generator g(0x0123456789abcdefull);
  EXPECT_EQ(g.block(0x1122334455667788ull), philox4x32({0x55667788, 0x11223344, 0, 0}, {0x89abcdef, 0x01234567}));
  EXPECT_EQ(Generator(0).block(0), (Words{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
}

// ---- exact values (seed 0, block 0 = the first known-answer vector) ---------------------------

TEST(RandomTest, RandUsesTop24BitsForFloat32And53BitsForFloat64) {
  Generator g(0);
  EXPECT_EQ(to_vector<float>(rand({4}, DType::Float32, &g)),
            (std::vector<float>{0.3990464210510254f, 0.8805201649665833f, 0.7357127666473389f, 0.6054818034172058f}));
  g.manual_seed(0);
  EXPECT_EQ(to_vector<double>(rand({2}, DType::Float64, &g)), (std::vector<double>{0.3990464708489645, 0.7357127844834425}));
}

TEST(RandomTest, RandnIsBoxMullerOfTheBlockWords) {
  // z = sqrt(-2 ln u1) * (cos, sin)(2 pi u2) with u = (word + 0.5) / 2^32, computed in Python.
  Generator g(0);
  const std::vector<float> z = to_vector<float>(randn({4}, DType::Float32, &g));
  const std::vector<double> expected{0.9911376799303855, -0.9246625876655352, -0.6176089594591907, -0.48206858748717946};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(z[i], expected[i], 1e-6) << i;
}

// ---- reproducibility ---------------------------------------------------------------------------

TEST(RandomTest, SameSeedGivesSameNumbers) {
  Generator a(42), b(42), c(43);
  const auto x = to_vector<float>(randn({1000}, DType::Float32, &a));
  EXPECT_EQ(x, to_vector<float>(randn({1000}, DType::Float32, &b)));
  EXPECT_NE(x, to_vector<float>(randn({1000}, DType::Float32, &c)));
  manual_seed(7);
  const auto y = to_vector<int64_t>(randint(0, 1000, {100}));
  manual_seed(7);
  EXPECT_EQ(y, to_vector<int64_t>(randint(0, 1000, {100})));
}

TEST(RandomTest, ElementDependsOnlyOnSeedAndPosition) {
  // Two draws of 4 float32 values (one block each) equal one draw of 8.
  Generator a(5), b(5);
  const auto whole = to_vector<float>(rand({8}, DType::Float32, &a));
  auto first = to_vector<float>(rand({4}, DType::Float32, &b));
  const auto second = to_vector<float>(rand({2, 2}, DType::Float32, &b));
  first.insert(first.end(), second.begin(), second.end());
  EXPECT_EQ(first, whole);
  // A longer draw starts with the shorter one.
  Generator c(5);
  const auto longer = to_vector<float>(rand({100}, DType::Float32, &c));
  EXPECT_EQ(std::vector<float>(longer.begin(), longer.begin() + 8), whole);
}

TEST(RandomTest, DrawsAreIdenticalForAnyThreadCount) {
  ThreadCountGuard restore;
  auto draw_all = [](int threads) {
    set_num_threads(threads);
    Generator g(123);
    std::vector<double> v = to_vector<double>(rand({300000}, DType::Float32, &g));
    for (double x : to_vector<double>(randn({300001}, DType::Float64, &g))) v.push_back(x);
    for (int64_t x : to_vector<int64_t>(randint(-5, 1000000, {300002}, DType::Int64, &g))) v.push_back(static_cast<double>(x));
    for (int64_t x : to_vector<int64_t>(randperm(200003, &g))) v.push_back(static_cast<double>(x));
    v.push_back(static_cast<double>(g.offset()));
    return v;
  };
  const auto one = draw_all(1);
  EXPECT_EQ(one, draw_all(2));
  EXPECT_EQ(one, draw_all(3));
}

TEST(RandomTest, OffsetAdvancesByConsumedBlocks) {
  Generator g(1);
  rand({10}, DType::Float32, &g);  // 4 per block
  EXPECT_EQ(g.offset(), 3u);
  rand({10}, DType::Float64, &g);  // 2 per block
  EXPECT_EQ(g.offset(), 8u);
  randn({10}, DType::Float32, &g);
  EXPECT_EQ(g.offset(), 11u);
  randn({3}, DType::Float64, &g);
  EXPECT_EQ(g.offset(), 13u);
  randint(0, 10, {5}, DType::Int64, &g);  // range <= 2^32: one word each
  EXPECT_EQ(g.offset(), 15u);
  randint(0, int64_t{1} << 40, {5}, DType::Int64, &g);  // wide range: two words each
  EXPECT_EQ(g.offset(), 18u);
  randperm(10, &g);  // 9 swaps
  EXPECT_EQ(g.offset(), 21u);
  rand({0}, DType::Float32, &g);
  randperm(1, &g);
  EXPECT_EQ(g.offset(), 21u);
}

TEST(RandomTest, SetStateReproducesTheDraw) {
  Generator g(99);
  rand({17}, DType::Float32, &g);
  const uint64_t seed = g.seed(), offset = g.offset();
  const auto x = to_vector<float>(randn({50}, DType::Float32, &g));
  const auto p = to_vector<int64_t>(randperm(20, &g));
  Generator other;
  other.set_state(seed, offset);
  EXPECT_EQ(x, to_vector<float>(randn({50}, DType::Float32, &other)));
  EXPECT_EQ(p, to_vector<int64_t>(randperm(20, &other)));
}

TEST(RandomTest, ExplicitGeneratorLeavesDefaultGeneratorAlone) {
  manual_seed(3);
  Generator g(3);
  rand({100}, DType::Float32, &g);
  EXPECT_EQ(default_generator().offset(), 0u);
  rand({100});
  EXPECT_EQ(default_generator().offset(), 25u);
  {
    GeneratorGuard guard(&g);  // a scope-wide generator serves calls that pass none
    EXPECT_EQ(&current_generator(), &g);
    rand({4});
  }
  EXPECT_EQ(g.offset(), 26u);
  EXPECT_EQ(&current_generator(), &default_generator());
}

TEST(RandomTest, CallByNameDrawsFromCurrentGenerator) {
  Generator a(11), b(11);
  Tensor direct = rand({2, 3}, DType::Float64, &a);
  GeneratorGuard guard(&b);
  Stack out = call_op("rand", {IntList{2, 3}, DType::Float64});
  EXPECT_EQ(to_vector<double>(out[0].tensor()), to_vector<double>(direct));
  EXPECT_EQ(out[0].tensor().sizes(), (IntList{2, 3}));
}

// ---- distributions ------------------------------------------------------------------------------

TEST(RandomTest, RandIsInHalfOpenUnitInterval) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    Generator g(2024);
    const auto v = to_vector<double>(rand({1000000}, dt, &g));
    EXPECT_GE(*std::min_element(v.begin(), v.end()), 0.0);
    EXPECT_LT(*std::max_element(v.begin(), v.end()), 1.0);
    const Moments m = moments(v);
    EXPECT_NEAR(m.mean, 0.5, 0.002);                 // std error 0.0003
    EXPECT_NEAR(m.std, std::sqrt(1.0 / 12.0), 0.002);
  }
}

TEST(RandomTest, RandnHasZeroMeanUnitStd) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    Generator g(77);
    const auto v = to_vector<double>(randn({1000000}, dt, &g));
    const Moments m = moments(v);
    EXPECT_NEAR(m.mean, 0.0, 0.005);  // std error 0.001
    EXPECT_NEAR(m.std, 1.0, 0.005);
    // About 4.55% of a normal sample lies beyond 2 sigma.
    const auto tails = std::count_if(v.begin(), v.end(), [](double x) { return std::abs(x) > 2.0; });
    EXPECT_NEAR(static_cast<double>(tails) / 1e6, 0.0455, 0.002);
  }
}

TEST(RandomTest, RandintStaysInRangeAndHitsEveryValue) {
  Generator g(8);
  const auto v = to_vector<int64_t>(randint(-3, 4, {300000}, DType::Int64, &g));
  std::map<int64_t, int64_t> counts;
  for (int64_t x : v) counts[x]++;
  ASSERT_EQ(counts.size(), 7u);
  EXPECT_EQ(counts.begin()->first, -3);
  EXPECT_EQ(counts.rbegin()->first, 3);
  // Each count is Binomial(300000, 1/7): mean 42857, std 192.
  for (auto [value, count] : counts) EXPECT_NEAR(static_cast<double>(count), 300000.0 / 7.0, 1200.0) << value;
}

TEST(RandomTest, RandintRejectionsRedrawWithoutMovingTheOffset) {
  // Ranges just above 2^31 (narrow) and 2^62 (wide) reject about half / a quarter of the
  // first words, so most elements go through the retry stream.
  ThreadCountGuard restore;
  const int64_t narrow = (int64_t{1} << 31) + 1, wide = (int64_t{1} << 62) + 1;
  auto draw = [&](int threads, int64_t range) {
    set_num_threads(threads);
    Generator g(31);
    auto v = to_vector<int64_t>(randint(0, range, {100000}, DType::Int64, &g));
    v.push_back(static_cast<int64_t>(g.offset()));
    return v;
  };
  for (int64_t range : {narrow, wide}) {
    const auto v = draw(1, range);
    EXPECT_EQ(v, draw(2, range));
    EXPECT_EQ(v.back(), range == narrow ? 25000 : 50000);
    double mean = 0;
    for (size_t i = 0; i + 1 < v.size(); ++i) {
      ASSERT_GE(v[i], 0);
      ASSERT_LT(v[i], range);
      mean += static_cast<double>(v[i]) / static_cast<double>(range) / 100000.0;
    }
    EXPECT_NEAR(mean, 0.5, 0.005);  // std error 0.0009
  }
}

TEST(RandomTest, RandintHonoursDtypeAndFullInt64Range) {
  Generator g(9);
  Tensor small = randint(0, 256, {1000}, DType::UInt8, &g);
  EXPECT_EQ(small.dtype(), DType::UInt8);
  Tensor f = randint(-2, 2, {3, 4}, DType::Float32, &g);
  EXPECT_EQ(f.dtype(), DType::Float32);
  for (float x : to_vector<float>(f)) EXPECT_TRUE(x == -2 || x == -1 || x == 0 || x == 1) << x;
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  const auto wide = to_vector<int64_t>(randint(lo, hi, {1000}, DType::Int64, &g));
  const auto negative = std::count_if(wide.begin(), wide.end(), [](int64_t x) { return x < 0; });
  EXPECT_NEAR(static_cast<double>(negative), 500.0, 80.0);
  EXPECT_NE(*std::max_element(wide.begin(), wide.end()), hi);  // high is exclusive (and unlikely anyway)
}

TEST(RandomTest, RandpermIsAPermutation) {
  Generator g(10);
  const auto p = to_vector<int64_t>(randperm(1000, &g));
  std::vector<int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(1000);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
  EXPECT_NE(p, iota);
  EXPECT_EQ(randperm(0, &g).sizes(), (IntList{0}));
  EXPECT_EQ(to_vector<int64_t>(randperm(1, &g)), (std::vector<int64_t>{0}));
  EXPECT_EQ(randperm(5).dtype(), DType::Int64);
}

TEST(RandomTest, RandpermPositionsAreUniform) {
  // Where does element 0 land? Every position with probability 1/4.
  Generator g(12);
  std::array<int, 4> where{};
  for (int trial = 0; trial < 8000; ++trial) {
    const auto p = to_vector<int64_t>(randperm(4, &g));
    where[static_cast<size_t>(std::find(p.begin(), p.end(), 0) - p.begin())]++;
  }
  for (int count : where) EXPECT_NEAR(count, 2000, 180);  // std 39
}

TEST(RandomTest, LikeVariantsFollowShapeAndDtypeWithoutHistory) {
  Tensor x = zeros({2, 5}, DType::Float64).requires_grad_();
  Tensor u = rand_like(x);
  Tensor n = randn_like(x);
  EXPECT_EQ(u.sizes(), (IntList{2, 5}));
  EXPECT_EQ(u.dtype(), DType::Float64);
  EXPECT_EQ(n.dtype(), DType::Float64);
  EXPECT_FALSE(u.requires_grad());
  EXPECT_FALSE(n.requires_grad());
  Generator a(4), b(4);
  EXPECT_EQ(to_vector<double>(randn_like(x, &a)), to_vector<double>(randn({2, 5}, DType::Float64, &b)));
}

// ---- errors ---------------------------------------------------------------------------------------

TEST(RandomTest, ErrorsNameTheOpAndTheBadValue) {
  EXPECT_THAT(error_of([] { randint(5, 5, {3}); }), HasSubstr("randint: expected low < high, got low=5 and high=5"));
  EXPECT_THAT(error_of([] { randint(0, 300, {3}, DType::Int8); }), HasSubstr("randint: range [0, 300) is not representable in int8"));
  EXPECT_THAT(error_of([] { rand({2, -1}); }), HasSubstr("rand: negative dimension -1 in shape [2, -1]"));
  EXPECT_THAT(error_of([] { randn({-3}); }), HasSubstr("randn: negative dimension -3"));
  EXPECT_THAT(error_of([] { randint(0, 2, {-1}); }), HasSubstr("randint: negative dimension -1"));
  EXPECT_THAT(error_of([] { randperm(-3); }), HasSubstr("randperm: n must be non-negative, got -3"));
  EXPECT_THAT(error_of([] { rand({2}, DType::Int64); }), HasSubstr("rand: expected a floating point dtype (float32 or float64), got int64"));
  EXPECT_THAT(error_of([] { randn_like(zeros({2}, DType::Int32)); }), HasSubstr("randn_like: expected a floating point dtype"));
}
