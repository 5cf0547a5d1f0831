// The fake_quantize op and compute_qparams: hand-computed values for every formula, scheme and
// granularity (ties at .5, negative zero points, zero ranges, 2 and 16 bits), PyTorch goldens,
// argument errors. See Note [Quantization numerics].
#include "nn/golden_util.h"
#include "quant/quant_golden.inc"
#include "quant/quant_test_util.h"

using namespace qflow;
using namespace qflow::quant;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using quant_test::error_of;
using quant_test::values;
using quant_test::vec;

namespace {

// fake_quantize of x with the qparams of [lo, hi] (per tensor).
std::vector<float> fq(const std::vector<float>& x, float lo, float hi, const QConfig& qc) {
  const QParams qp = compute_qparams(vec({lo}), vec({hi}), qc);
  return values(fake_quantize(vec(x), qp, qc));
}

float scale_of(float lo, float hi, const QConfig& qc) { return values(compute_qparams(vec({lo}), vec({hi}), qc).scale)[0]; }
float zero_point_of(float lo, float hi, const QConfig& qc) {
  return values(compute_qparams(vec({lo}), vec({hi}), qc).zero_point)[0];
}

const QConfig kSym3{.bits = 3};
const QConfig kAff2{.bits = 2, .scheme = Scheme::Affine};

// ---- google, symmetric -------------------------------------------------------------------------

TEST(ComputeQParamsTest, GoogleSymmetricScaleIsAbsMaxOverHalfGrid) {
  EXPECT_FLOAT_EQ(scale_of(-2.54f, 1.0f, {}), 2.54f / 127.0f);
  EXPECT_EQ(scale_of(-2.54f, 1.0f, {}), 2.54f / 127.0f);  // float32 math, bit for bit
  EXPECT_EQ(scale_of(-1.0f, 6.35f, {}), 6.35f / 127.0f);
  EXPECT_EQ(zero_point_of(-1.0f, 6.35f, {}), 0.0f);
  EXPECT_EQ(scale_of(-3.0f, 3.0f, kSym3), 1.0f);  // 3 bits: 2^2 - 1 = 3
  EXPECT_EQ(scale_of(0.5f, 3.0f, kSym3), 1.0f);   // |max| wins even when min > 0
}

TEST(FakeQuantizeTest, GoogleSymmetricRoundsHalfToEvenAndClamps) {
  // scale 1, grid [-4, 3].
  EXPECT_THAT(fq({-5.0f, -3.5f, -2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 3.4f, 3.6f}, -3.0f, 3.0f, kSym3),
              ElementsAre(-4.0f, -4.0f, -2.0f, -2.0f, 0.0f, 0.0f, 2.0f, 2.0f, 3.0f, 3.0f));
  // 8 bits, scale 2.54 / 127: the ends of the grid are -128 and 127 steps.
  const QConfig qc;
  const float s = 2.54f / 127.0f;
  EXPECT_THAT(fq({0.1f, 1.0f, -3.0f, 2.54f}, -2.54f, 1.0f, qc), ElementsAre(5.0f * s, 50.0f * s, -128.0f * s, 127.0f * s));
}

// ---- google, affine ----------------------------------------------------------------------------

TEST(ComputeQParamsTest, GoogleAffineZeroPointRoundsHalfToEven) {
  EXPECT_EQ(scale_of(-1.5f, 1.5f, kAff2), 1.0f);  // (max - min) / (2^2 - 1)
  EXPECT_EQ(zero_point_of(-1.5f, 1.5f, kAff2), 2.0f);   // -round(-1.5) = 2
  EXPECT_EQ(zero_point_of(-0.5f, 2.5f, kAff2), 0.0f);   // -round(-0.5) = 0
  EXPECT_EQ(zero_point_of(-2.5f, 0.5f, kAff2), 2.0f);   // -round(-2.5) = 2
  const QConfig aff8{.scheme = Scheme::Affine};
  EXPECT_EQ(scale_of(-1.0f, 1.55f, aff8), (1.55f - -1.0f) / 255.0f);
  EXPECT_EQ(zero_point_of(-1.0f, 1.55f, aff8), 100.0f);
}

TEST(ComputeQParamsTest, GoogleAffineRangeIsWidenedToIncludeZero) {
  // [2, 5] becomes [0, 5]: scale 5/3, zero point 0 (and not -0).
  EXPECT_EQ(scale_of(2.0f, 5.0f, kAff2), 5.0f / 3.0f);
  EXPECT_EQ(zero_point_of(2.0f, 5.0f, kAff2), 0.0f);
  EXPECT_FALSE(std::signbit(zero_point_of(2.0f, 5.0f, kAff2)));
  const QConfig aff8{.scheme = Scheme::Affine};
  EXPECT_EQ(scale_of(1.0f, 3.55f, aff8), 3.55f / 255.0f);
  EXPECT_EQ(zero_point_of(1.0f, 3.55f, aff8), 0.0f);
  // [-5, -2] becomes [-5, 0]: scale 5/3, zero point 3, the top of the grid [0, 3].
  EXPECT_EQ(scale_of(-5.0f, -2.0f, kAff2), 5.0f / 3.0f);
  EXPECT_EQ(zero_point_of(-5.0f, -2.0f, kAff2), 3.0f);
}

TEST(FakeQuantizeTest, GoogleAffineRoundsAndClampsOnTheUnsignedGrid) {
  // scale 1, zero_point 2, grid [0, 3]: q = clamp(round(x + 2)), out = q - 2.
  EXPECT_THAT(fq({-2.6f, -1.5f, -0.5f, 0.5f, 1.5f, 2.0f}, -1.5f, 1.5f, kAff2),
              ElementsAre(-2.0f, -2.0f, 0.0f, 0.0f, 1.0f, 1.0f));
}

TEST(FakeQuantizeTest, GoogleAffinePositiveOnlyAndNegativeOnlyRangesKeepZeroExact) {
  // [2, 5] → scale s = 5/3, zero point 0: q = clamp(round(x / s), 0, 3), out = q · s; 0 stays 0.
  const float s = 5.0f / 3.0f;
  EXPECT_THAT(fq({0.0f, 1.6f, 2.0f, 3.4f, 3.5f, 4.5f, 5.0f, 6.0f}, 2.0f, 5.0f, kAff2),
              ElementsAre(0.0f, s, s, 2 * s, 2 * s, 3 * s, 3 * s, 3 * s));
  // [-5, -2] → scale s, zero point 3: q = clamp(round(x / s + 3), 0, 3), out = (q - 3) · s.
  EXPECT_THAT(fq({-6.0f, -5.0f, -2.0f, 0.0f, 1.0f}, -5.0f, -2.0f, kAff2),
              ElementsAre(-3 * s, -3 * s, -1 * s, 0.0f, 0.0f));
}

TEST(FakeQuantizeTest, AffineRoundsTheSumWithTheZeroPoint) {
  // scale 1, zero_point 1 (odd): round(0.5 + 1) = 2 → out 1, round(-0.5 + 1) = 0 → out -1,
  // round(1.5 + 1) = 2 → out 1. PyTorch rounds x / scale before adding the zero point
  // (round(0.5) + 1 = 1 → 0, round(-0.5) + 1 = 1 → 0, round(1.5) + 1 = 3 → 2); the issue's
  // formula rounds the sum.
  EXPECT_EQ(zero_point_of(-1.0f, 2.0f, kAff2), 1.0f);
  EXPECT_THAT(fq({0.5f, -0.5f, 1.5f}, -1.0f, 2.0f, kAff2), ElementsAre(1.0f, -1.0f, 1.0f));
}

// ---- cambricon -----------------------------------------------------------------------------------

TEST(ComputeQParamsTest, CambriconScaleIsAPowerOfTwo) {
  const QConfig cam{.formula = Formula::Cambricon};
  EXPECT_EQ(scale_of(-3.0f, 1.0f, cam), 1.0f / 32.0f);   // floor(log2 3) - 6 = -5
  EXPECT_EQ(scale_of(-1.0f, 4.0f, cam), 1.0f / 16.0f);   // floor(log2 4) - 6 = -4
  EXPECT_EQ(scale_of(-0.3f, 0.1f, cam), 1.0f / 256.0f);  // floor(log2 0.3) - 6 = -8
  EXPECT_EQ(scale_of(-0.5f, std::nextafter(1.0f, 0.0f), cam), 1.0f / 128.0f);  // floor(log2 0.99999994) = -1
  EXPECT_EQ(zero_point_of(-3.0f, 1.0f, cam), 0.0f);
  const QConfig cam2{.bits = 2, .formula = Formula::Cambricon};
  EXPECT_EQ(scale_of(-3.0f, 1.0f, cam2), 2.0f);  // floor(log2 3) - 0 = 1
}

TEST(FakeQuantizeTest, CambriconTwoBit) {
  // scale 2, grid [-2, 1]: 3 / 2 = 1.5 rounds to 2 and clamps to 1.
  const QConfig cam2{.bits = 2, .formula = Formula::Cambricon};
  EXPECT_THAT(fq({3.0f, -3.0f, 1.0f, -1.0f, 0.9f, 2.9f, -5.0f}, -3.0f, 1.0f, cam2),
              ElementsAre(2.0f, -4.0f, 0.0f, 0.0f, 0.0f, 2.0f, -4.0f));
  // 8 bits, scale 1/32: 127/32 is the largest value, 3 = 96/32 is exact.
  const QConfig cam{.formula = Formula::Cambricon};
  EXPECT_THAT(fq({3.0f, 5.0f, 1.0f / 64.0f, 3.0f / 64.0f}, -3.0f, 1.0f, cam),
              ElementsAre(3.0f, 127.0f / 32.0f, 0.0f, 2.0f / 32.0f));
}

TEST(FakeQuantizeTest, CambriconPerChannel) {
  const QConfig cam{.formula = Formula::Cambricon};
  const QParams qp = compute_qparams(vec({-3.0f, -0.1f}), vec({1.0f, 0.3f}), cam);
  EXPECT_THAT(values(qp.scale), ElementsAre(1.0f / 32.0f, 1.0f / 256.0f));
  const Tensor x = from_vector<float>({0.05f, 5.0f, 0.05f, 5.0f}, {2, 2});
  EXPECT_THAT(values(fake_quantize(x, qp, cam)),
              ElementsAre(std::nearbyint(0.05f * 32.0f) / 32.0f, 127.0f / 32.0f, std::nearbyint(0.05f * 256.0f) / 256.0f,
                          127.0f / 256.0f));
}

// ---- 2 and 16 bits ---------------------------------------------------------------------------------

TEST(FakeQuantizeTest, SixteenBitGrids) {
  const QConfig sym16{.bits = 16};
  EXPECT_EQ(scale_of(-32767.0f, 1.0f, sym16), 1.0f);
  EXPECT_THAT(fq({0.5f, 1.5f, 32767.4f, 40000.0f, -40000.0f, -32767.5f}, -32767.0f, 1.0f, sym16),
              ElementsAre(0.0f, 2.0f, 32767.0f, 32767.0f, -32768.0f, -32768.0f));
  const QConfig aff16{.bits = 16, .scheme = Scheme::Affine};
  EXPECT_EQ(scale_of(0.0f, 65535.0f, aff16), 1.0f);
  EXPECT_THAT(fq({-3.0f, 2.5f, 3.5f, 65534.5f, 65535.5f, 70000.0f}, 0.0f, 65535.0f, aff16),
              ElementsAre(0.0f, 2.0f, 4.0f, 65534.0f, 65535.0f, 65535.0f));
}

TEST(FakeQuantizeTest, TwoBitSymmetric) {
  // bits 2: grid [-2, 1], scale = absmax / 1.
  const QConfig sym2{.bits = 2};
  EXPECT_EQ(scale_of(-0.5f, 0.25f, sym2), 0.5f);
  EXPECT_THAT(fq({-2.0f, -0.75f, -0.25f, 0.25f, 0.3f, 0.75f}, -0.5f, 0.25f, sym2),
              ElementsAre(-1.0f, -1.0f, 0.0f, 0.0f, 0.5f, 0.5f));
}

// ---- zero ranges -----------------------------------------------------------------------------------

TEST(FakeQuantizeTest, ZeroRangeIsTheIdentityForEveryFormula) {
  const QConfig configs[] = {{}, {.scheme = Scheme::Affine}, {.formula = Formula::Cambricon}, {.bits = 2},
                             {.bits = 16, .scheme = Scheme::Affine}};
  for (const QConfig& qc : configs) {
    SCOPED_TRACE(qc.to_string());
    const Tensor zeros3 = zeros({3});
    const Range r = tensor_range(zeros3, false);
    const QParams qp = compute_qparams(r.min, r.max, qc);
    EXPECT_THAT(values(qp.scale), ElementsAre(0.0f));
    EXPECT_THAT(values(qp.zero_point), ElementsAre(0.0f));
    EXPECT_THAT(values(fake_quantize(zeros3, qp, qc)), ElementsAre(0.0f, 0.0f, 0.0f));
    // An empty range also passes other values through (an observer that saw only zeros).
    EXPECT_THAT(values(fake_quantize(vec({1.5f, -2.25f}), qp, qc)), ElementsAre(1.5f, -2.25f));
  }
  // A constant non-zero tensor has an empty affine range too.
  const QConfig aff{.scheme = Scheme::Affine};
  EXPECT_THAT(fq({0.7f, 0.7f}, 0.7f, 0.7f, aff), ElementsAre(0.7f, 0.7f));
}

TEST(FakeQuantizeTest, ZeroRangeChannelPassesThroughBesideAQuantizedOne) {
  const Tensor w = from_vector<float>({0, 0, 0, -1.0f, 0.5f, 1.0f}, {2, 3});
  const QConfig sym2{.bits = 2, .per_layer = false};
  const Range r = tensor_range(w, true);
  EXPECT_THAT(values(r.min), ElementsAre(0.0f, -1.0f));
  EXPECT_THAT(values(r.max), ElementsAre(0.0f, 1.0f));
  const QParams qp = compute_qparams(r.min, r.max, sym2);
  EXPECT_THAT(values(qp.scale), ElementsAre(0.0f, 1.0f));
  const std::vector<float> out = values(fake_quantize(w, qp, sym2));
  EXPECT_THAT(out, ElementsAre(0.0f, 0.0f, 0.0f, -1.0f, 0.0f, 1.0f));
  for (float v : out) EXPECT_TRUE(std::isfinite(v));
}

// ---- per channel -----------------------------------------------------------------------------------

TEST(FakeQuantizeTest, PerChannelAlongAxisZeroAndOne) {
  // Channel scales [1, 0.5], 3-bit symmetric grid [-4, 3].
  const Tensor s = vec({1.0f, 0.5f}), z = vec({0.0f, 0.0f});
  const Tensor rows = from_vector<float>({1.5f, -5.0f, 2.2f, 0.25f, 0.75f, 2.0f}, {2, 3});
  EXPECT_THAT(values(fake_quantize(rows, s, z, -4, 3, 0)), ElementsAre(2.0f, -4.0f, 2.0f, 0.0f, 1.0f, 1.5f));
  // The same values laid out as columns: axis 1 (and -1) picks the channel by column.
  const Tensor cols = rows.t().contiguous();
  EXPECT_THAT(values(fake_quantize(cols, s, z, -4, 3, 1)), ElementsAre(2.0f, 0.0f, -4.0f, 1.0f, 2.0f, 1.5f));
  EXPECT_THAT(values(fake_quantize(cols, s, z, -4, 3, -1)), ElementsAre(2.0f, 0.0f, -4.0f, 1.0f, 2.0f, 1.5f));
  // A non-contiguous input gives the same answer as its contiguous copy.
  EXPECT_THAT(values(fake_quantize(rows.t(), s, z, -4, 3, 1)), ElementsAre(2.0f, 0.0f, -4.0f, 1.0f, 2.0f, 1.5f));
}

TEST(FakeQuantizeTest, PerChannelAffineZeroPoints) {
  // 2-bit affine channels: [-1.5, 1.5] (scale 1, zp 2) and [2, 5], widened to [0, 5] (scale 5/3, zp 0).
  const QConfig aff2{.bits = 2, .scheme = Scheme::Affine, .per_layer = false};
  const QParams qp = compute_qparams(vec({-1.5f, 2.0f}), vec({1.5f, 5.0f}), aff2);
  EXPECT_THAT(values(qp.zero_point), ElementsAre(2.0f, 0.0f));
  const float s = 5.0f / 3.0f;
  const Tensor x = from_vector<float>({-2.6f, 0.5f, 1.5f, 1.6f, 3.5f, 6.0f}, {2, 3});
  EXPECT_THAT(values(fake_quantize(x, qp, aff2)), ElementsAre(-2.0f, 0.0f, 1.0f, s, 2 * s, 3 * s));
}

TEST(FakeQuantizeTest, Float64InputsUseTheSameGrid) {
  const Tensor x = vec({-5.0f, -2.5f, -0.5f, 1.5f, 3.6f}).to(DType::Float64);
  const Tensor y = fake_quantize(x, vec({1.0f}), vec({0.0f}), -4, 3);
  EXPECT_EQ(y.dtype(), DType::Float64);
  EXPECT_THAT(to_vector<double>(y), ElementsAre(-4.0, -2.0, 0.0, 2.0, 3.0));
}

// Large enough for several threads, with channel runs that straddle the thread chunks.
TEST(FakeQuantizeTest, ParallelPassMatchesAScalarReference) {
  const int64_t c = 7, inner = 10007;
  const Tensor x = randn({c, inner}).mul(3.0);
  const Tensor s = vec({0.1f, 0.02f, 0.5f, 0.0f, 0.03f, 1.0f, 0.25f});
  const Tensor z = vec({3.0f, -7.0f, 0.0f, 0.0f, 128.0f, 1.0f, -2.0f});
  const std::vector<float> xs = values(x), sv = values(s), zv = values(z);
  const std::vector<float> got = values(fake_quantize(x, s, z, 0, 255, 0));
  int bad = 0;
  for (int64_t i = 0; i < c * inner; ++i) {
    const size_t ch = static_cast<size_t>(i / inner);
    float want = xs[i];
    if (sv[ch] != 0.0f) {
      const float q = std::min(std::max(std::nearbyint(xs[i] / sv[ch] + zv[ch]), 0.0f), 255.0f);
      want = (q - zv[ch]) * sv[ch];
    }
    if (got[i] != want && bad++ < 5) ADD_FAILURE() << "element " << i << ": got " << got[i] << ", want " << want;
  }
}

// ---- PyTorch goldens ---------------------------------------------------------------------------------

void expect_golden(const quant_golden::FakeQuantGolden& g, const Tensor& x, const QConfig& qc, int64_t axis) {
  QParams qp;
  if (g.scale.size() == 1) {
    const Range r = tensor_range(x, false);
    qp = compute_qparams(r.min, r.max, qc);
  } else {
    IntList others;
    for (int64_t d = 0; d < x.dim(); ++d)
      if (d != axis) others.push_back(d);
    qp = compute_qparams(amin(x, others), amax(x, others), qc, axis);
  }
  EXPECT_THAT(values(qp.scale), ElementsAreArray(g.scale));
  EXPECT_THAT(values(qp.zero_point), ElementsAreArray(g.zero_point));
  const Tensor y = fake_quantize(x, qp, qc);
  ASSERT_EQ(y.sizes(), IntList(g.shape));
  EXPECT_THAT(values(y), ElementsAreArray(g.values));  // exact: same float32 operations
}

TEST(FakeQuantizeGoldenTest, MatchesPyTorchPerTensor) {
  using namespace quant_golden;
  const QConfig aff8{.scheme = Scheme::Affine};
  const QConfig aff4{.bits = 4, .scheme = Scheme::Affine};
  expect_golden(per_tensor_symmetric_8bit, nn_golden::seq({4, 5, 6}, 0.5, 2.0), {}, 0);
  expect_golden(per_tensor_affine_8bit, nn_golden::seq({4, 5, 6}, 0.7, 2.0), aff8, 0);
  expect_golden(per_tensor_affine_4bit, nn_golden::seq({3, 7}, 1.1, 0.7), aff4, 0);
}

TEST(FakeQuantizeGoldenTest, MatchesPyTorchPerChannel) {
  using namespace quant_golden;
  const QConfig sym8{.per_layer = false};
  const QConfig aff8{.scheme = Scheme::Affine, .per_layer = false};
  const QConfig aff4{.bits = 4, .scheme = Scheme::Affine, .per_layer = false};
  const QConfig sym16{.bits = 16, .per_layer = false};
  expect_golden(per_channel_symmetric_8bit, nn_golden::seq({4, 3, 2, 2}, 1.3, 0.4), sym8, 0);
  expect_golden(per_channel_affine_8bit, nn_golden::seq({4, 3, 2, 2}, 1.3, 0.4), aff8, 0);
  expect_golden(per_channel_affine_4bit_axis1, nn_golden::seq({3, 4, 5}, 0.3, 1.5), aff4, 1);
  expect_golden(per_channel_symmetric_16bit, nn_golden::seq({5, 6}, 0.7, 2.0), sym16, 0);
}

// ---- errors ------------------------------------------------------------------------------------------

TEST(FakeQuantizeTest, RejectsBadArguments) {
  const Tensor x = zeros({2, 3});
  EXPECT_THAT(error_of([&] { fake_quantize(x, vec({-1.0f}), vec({0.0f}), -4, 3); }),
              HasSubstr("fake_quantize: scale must be finite and non-negative, got -1 (channel 0)"));
  EXPECT_THAT(error_of([&] { fake_quantize(x, vec({1.0f, 2.0f}), vec({0.0f, 0.0f}), -4, 3, 1); }),
              HasSubstr("fake_quantize: per-channel scale has 2 elements but the input of shape [2, 3] has 3 channels "
                        "along axis 1"));
  EXPECT_THAT(error_of([&] { fake_quantize(x, vec({1.0f, 2.0f}), vec({0.0f}), -4, 3); }),
              HasSubstr("scale and zero_point must be 0-d or 1-d with the same number of elements, got shapes [2] and [1]"));
  EXPECT_THAT(error_of([&] { fake_quantize(x, vec({1.0f, 2.0f}), vec({0.0f, 0.0f}), -4, 3, 2); }),
              HasSubstr("fake_quantize: axis 2 is out of range for an input of shape [2, 3]"));
  EXPECT_THAT(error_of([&] { fake_quantize(x, vec({1.0f}), vec({0.0f}), 3, 3); }),
              HasSubstr("fake_quantize: quant_min (3) must be less than quant_max (3)"));
  EXPECT_THAT(error_of([&] { fake_quantize(zeros({2}, DType::Int64), vec({1.0f}), vec({0.0f}), -4, 3); }),
              HasSubstr("fake_quantize: expected a float32 or float64 input, got int64"));
  EXPECT_THAT(error_of([&] { compute_qparams(vec({1.0f}), vec({0.5f}), {}); }),
              HasSubstr("compute_qparams: invalid range [1, 0.5] (channel 0)"));
  EXPECT_THAT(error_of([&] { compute_qparams(vec({0.0f}), vec({1.0f}), {.bits = 20}); }),
              HasSubstr("bits must be in 2..16, got 20"));
}

TEST(FakeQuantizeTest, IsReachableByNameAndFromF) {
  const Stack out = call_op("fake_quantize", {vec({0.4f, 2.6f}), vec({1.0f}), vec({0.0f}), int64_t{-4}, int64_t{3}});
  EXPECT_THAT(values(out.at(0).tensor()), ElementsAre(0.0f, 3.0f));
  EXPECT_THAT(values(F::fake_quantize(vec({0.6f}), vec({0.5f}), vec({0.0f}), -4, 3)), ElementsAre(0.5f));
}

}  // namespace
